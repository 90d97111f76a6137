"""Let py-libp2p's yamux send DATA frames of up to 16 Noise messages (the one internal we patch).

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

from libp2p.security.noise.io import MAX_PLAINTEXT_LENGTH
from libp2p.stream_muxer.yamux import yamux

NOISE_MESSAGES_PER_FRAME = 16
FRAME_SIZE = NOISE_MESSAGES_PER_FRAME * MAX_PLAINTEXT_LENGTH  # header + payload, bytes
INITIAL_WINDOW = 256 * 1024  # yamux spec: every stream starts with this receive window
MAX_WINDOW = 16 * 1024 * 1024  # what go-yamux and py-libp2p auto-tune a receive window up to


def apply() -> None:
    """Idempotent; called whenever a host is built."""
    yamux.MAX_MESSAGE_SIZE = FRAME_SIZE


