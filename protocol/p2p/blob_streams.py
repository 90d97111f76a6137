"""The blob protocol's streams, as both ends use them: its protocol id, and a close or reset
that a frozen peer cannot hold up."""

from __future__ import annotations

import trio
from libp2p.abc import INetStream
from libp2p.custom_types import TProtocol

from protocol.p2p import framing
from protocol.p2p.host import NET_ERRORS

PROTOCOL = TProtocol(framing.BLOB_PROTOCOL_ID)


async def close_quietly(stream: INetStream, timeout_s: float, reset: bool = False) -> None:
    # A frozen peer must not hold us here: its connection's write lock may be stuck behind
    # a full TCP buffer, so even writing the RST frame can block.
    with trio.move_on_after(timeout_s):
        try:
            await (stream.reset() if reset else stream.close())
        except NET_ERRORS:
            pass
