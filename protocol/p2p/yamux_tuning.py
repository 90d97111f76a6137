"""Let py-libp2p's yamux send DATA frames of up to 4 Noise messages (the one internal we patch).

Why: a bulk transfer pays py-libp2p's per-frame cost (a Python-level header, window and lock
dance per frame on the sender; a header parse, buffer append and event per frame on the
receiver) every 64 KiB, which profiling put at ~30% of the client's and ~21% of the server's
CPU in a 50 MB fetch. py-libp2p 0.8.1 has no option for the frame size; `YamuxStream.write`
caps each frame at the module constant `MAX_MESSAGE_SIZE` (header included), read at call
time. Raising it only changes how our sender cuts its bytes: the wire format is unchanged.
Measured (`benchmarks p2p --quick`, 9 interleaved runs each, load 0.7-4, medians): client
7.5 -> 6.2 ms/MB, server 6.2 -> 4.4 ms/MB, every pair better on both sides; 2-message
(128 KiB) frames saved less (7.0 / 5.5 ms/MB over 6 runs).

Interop (INTEROP.md): the yamux spec and go/js/rust yamux bound a DATA frame only by the
receiver's window (initial 256 KiB), and py-libp2p's writer already cuts every frame to
`min(send_window, MAX_MESSAGE_SIZE - 12, ...)`, so no frame ever exceeds what the peer has
granted. Receiving is untouched: frames of any size up to the window are accepted, so peers
that send 64 KiB frames work as before. FRAME_SIZE (12-byte header + payload) is exactly
4 full Noise plaintexts (4 x 65 519 = 262 076 <= 256 KiB), so a frame is sealed into 4 full
Noise messages with no short tail; framing.WRITE_SIZE is sized from it.
tests/p2p/test_fastpath.py fails if the constant or the writer's use of it changes shape.
"""

from __future__ import annotations

from libp2p.security.noise.io import MAX_PLAINTEXT_LENGTH
from libp2p.stream_muxer.yamux import yamux

NOISE_MESSAGES_PER_FRAME = 4
FRAME_SIZE = NOISE_MESSAGES_PER_FRAME * MAX_PLAINTEXT_LENGTH  # header + payload, bytes
INITIAL_WINDOW = 256 * 1024  # yamux spec: every stream starts with this receive window


def apply() -> None:
    """Idempotent; called whenever a host is built."""
    yamux.MAX_MESSAGE_SIZE = FRAME_SIZE
