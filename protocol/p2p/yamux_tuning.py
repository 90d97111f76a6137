"""Let py-libp2p's yamux send DATA frames of up to 16 Noise messages, and reset any stream
whose sender overruns our receive window (the two py-libp2p internals we patch).

Why: a bulk transfer pays py-libp2p's per-frame cost (a Python-level header, window and lock
dance per frame on the sender; a header parse, buffer append, event and wake-up per frame on
the receiver) once per frame, and py-libp2p 0.8.1 cuts frames at 64 KiB with no option to
change it: `YamuxStream.write` caps each frame at the module constant `MAX_MESSAGE_SIZE`
(header included), read at call time. Raising it only changes how our sender cuts its bytes:
the wire format is unchanged. Measured on 50 MB fetches between two processes: 64 KiB ->
4-message frames took client/server CPU from 7.5/6.2 to 6.2/4.4 ms per MB; 4 -> 16 messages
(the blob server sending one chunk per frame) saved another ~0.4/0.8 ms per MB, every
interleaved pair better on both sides.

Interop (docs/INTEROP.md): the yamux spec and go/js/rust yamux bound a DATA frame only by the
receiver's window, and py-libp2p's writer cuts every frame to `min(send_window,
MAX_MESSAGE_SIZE - 12, ...)`, so no frame ever exceeds what the peer has granted. A fresh
stream may send 256 KiB (the spec's initial window); go, js, rust and py-libp2p receivers
auto-tune their window towards 16 MiB and grant more as they read, after which frames are
full size. Receiving is untouched: frames of any size up to our window are accepted, so
peers that send 64 KiB frames work as before. FRAME_SIZE (12-byte header + payload) is
exactly 16 full Noise plaintexts (16 x 65 519 = 1 048 304), so a full frame is sealed into
16 full Noise messages with no short tail; framing.WRITE_SIZE and SEND_CHUNK_SIZE are sized
from it. tests/p2p/test_fastpath.py fails if the constant or the writer's use of it changes.
"""

from __future__ import annotations

import logging

import trio
from libp2p.exceptions import BaseLibp2pError
from libp2p.security.noise.io import MAX_PLAINTEXT_LENGTH
from libp2p.stream_muxer.yamux import yamux

log = logging.getLogger(__name__)

NOISE_MESSAGES_PER_FRAME = 16
FRAME_SIZE = NOISE_MESSAGES_PER_FRAME * MAX_PLAINTEXT_LENGTH  # header + payload, bytes
INITIAL_WINDOW = 256 * 1024  # yamux spec: every stream starts with this receive window
MAX_WINDOW = 16 * 1024 * 1024  # what go-yamux and py-libp2p auto-tune a receive window up to


_STOCK_STREAM = yamux.YamuxStream
overruns = 0  # streams reset for overrunning their receive window, this process


class GuardedYamuxStream(_STOCK_STREAM):  # type: ignore[misc, valid-type]
    """A yamux stream that is reset as soon as its sender overruns the receive window."""

    _recv_window: int
    _overrun = False

    @property  # type: ignore[override]
    def recv_window(self) -> int:
        return self._recv_window

    @recv_window.setter
    def recv_window(self, value: int) -> None:
        # once overrun, the stream never grants credit again: a local reader's window update
        # racing the reset would otherwise let the next frames sit in the buffer
        self._recv_window = 0 if self._overrun else value
        if value < 0 or self._overrun:
            self._on_overrun(max(-value, 0))

    def _on_overrun(self, excess: int) -> None:
        global overruns
        buffered = self.conn.stream_buffers.get(self.stream_id)
        if buffered is not None:
            buffered.clear()  # never keep what the sender had no right to send
        if self._overrun:
            return
        self._overrun = True
        overruns += 1
        log.warning(
            "resetting stream %s of %s: sender overran the receive window by %d bytes",
            self.stream_id, self.conn.peer_id, excess,
        )
        self.recv_closed = True
        self.reset_received = True  # local readers see MuxedStreamReset
        nursery = self.conn._nursery
        if nursery is not None:
            nursery.start_soon(self._send_reset)

    async def _send_reset(self) -> None:
        try:
            await self.reset()
        except (BaseLibp2pError, OSError, trio.BrokenResourceError, trio.ClosedResourceError):
            pass  # the connection is going anyway
        event = self.conn.stream_events.get(self.stream_id)
        if event is not None:
            event.set()


def apply() -> None:
    """Idempotent; called whenever a host is built."""
    yamux.MAX_MESSAGE_SIZE = FRAME_SIZE
    yamux.YamuxStream = GuardedYamuxStream  # type: ignore[misc]


