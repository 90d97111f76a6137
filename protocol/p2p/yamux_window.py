"""Cap py-libp2p's yamux receive window at 4 MiB (the one py-libp2p internal we change).

Why: py-libp2p auto-tunes each stream's receive window up to go-yamux's 16 MiB, and on a
busy host it gets there during every blob fetch. Up to that many blob bytes can then sit in
the TCP buffers of the connection, ahead of any gossip frame on it: with the fetching node
at 30-60 MB/s, announcements arrived 0.4-1.2 s late (p50) while a transfer ran. With the cap,
at most 4 MiB of a stream is in flight. Throughput does not suffer on loopback: the sender
never ran out of window in our 50 MB fetches (py-libp2p's writer re-polls an empty window
every 10 ms, so the window must cover ~10 ms of transfer; 4 MiB is 25 ms at 160 MB/s).

How: py-libp2p 0.8.1 has no option for it (go-yamux has `MaxStreamWindowSize`); the cap is
the module constant `MAX_WINDOW_SIZE`, which `YamuxStream._apply_autotune_epoch` reads at
call time. It is only ever lowered here, which is always allowed: a receiver chooses its own
window, and peers on any implementation keep working. tests/p2p/test_fastpath.py fails if
that constant or the method reading it changes shape.
"""

from __future__ import annotations

from libp2p.stream_muxer.yamux import yamux

RECEIVE_WINDOW_CAP = 4 * 1024 * 1024


def apply() -> None:
    """Idempotent; called when the first host is built."""
    if yamux.MAX_WINDOW_SIZE > RECEIVE_WINDOW_CAP:
        yamux.MAX_WINDOW_SIZE = RECEIVE_WINDOW_CAP
