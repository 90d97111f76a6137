"""The blob protocol's streams, as both ends use them: its protocol id, a close or reset that
a frozen peer cannot hold up, and how a refused stream ends."""

from __future__ import annotations

import trio
from libp2p.abc import INetStream
from libp2p.custom_types import TProtocol

from protocol.p2p import framing
from protocol.p2p.host import NET_ERRORS

PROTOCOL = TProtocol(framing.BLOB_PROTOCOL_ID)
REFUSED_DRAIN_BYTES = 64 * 1024  # one read of what a refused requester still sends (dropped)


async def close_quietly(stream: INetStream, timeout_s: float, reset: bool = False) -> None:
    # A frozen peer must not hold us here: its connection's write lock may be stuck behind
    # a full TCP buffer, so even writing the RST frame can block.
    with trio.move_on_after(timeout_s):
        try:
            await (stream.reset() if reset else stream.close())
        except NET_ERRORS:
            pass


async def end_refused(stream: INetStream, timeout_s: float) -> None:
    """End a stream whose request was refused, in both directions, within about 2 x `timeout_s`.

    A FIN follows the status frame, so the requester reads the status and then EOF at once
    (a requester that waits for the stream's end, as js-libp2p clients do, is not left waiting
    on its own timeout). The node never reads what the requester still sends, so that is
    dropped until the requester's own end; a FIN that cannot be sent, or a requester that keeps
    its side open past `timeout_s`, gets the stream reset: it never stays half open."""
    with trio.move_on_after(timeout_s):
        try:
            await stream.close()
            while await stream.read(REFUSED_DRAIN_BYTES):
                pass
            return
        except NET_ERRORS:
            return  # the requester's end (EOF or reset), or the connection is gone
    await close_quietly(stream, timeout_s, reset=True)
