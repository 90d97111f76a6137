"""What the p2p layer tells an observer (the node's metrics) about its traffic, without
importing it: bytes per libp2p protocol in and out, and requests refused by a rate limit.

`CountedStream` wraps a libp2p stream and reports every byte our protocols read from or
write to it (the stream's payload: muxer and Noise framing are not counted).
"""

from __future__ import annotations

from typing import Any, Protocol

from libp2p.abc import INetStream
from libp2p.custom_types import TProtocol


class Traffic(Protocol):
    def bytes_in(self, protocol: str, nbytes: int) -> None:
        """`nbytes` of `protocol`'s stream payload arrived from a peer."""

    def bytes_out(self, protocol: str, nbytes: int) -> None:
        """`nbytes` of `protocol`'s stream payload went to a peer."""

    def rate_limited(self, limit: str) -> None:
        """A peer's request or message was refused by `limit` (ratelimit.py, the stream cap)."""


class NoTraffic:
    """An observer that keeps nothing (tests, tools that run a bare P2PNode)."""

    def bytes_in(self, protocol: str, nbytes: int) -> None:
        pass

    def bytes_out(self, protocol: str, nbytes: int) -> None:
        pass

    def rate_limited(self, limit: str) -> None:
        pass


NO_TRAFFIC = NoTraffic()


class CountedStream(INetStream):
    """`stream`, each read and write reported to `traffic` under `protocol`."""

    def __init__(self, stream: INetStream, protocol: str, traffic: Traffic) -> None:
        self.stream, self.protocol, self.traffic = stream, protocol, traffic
        self.muxed_conn = stream.muxed_conn

    async def read(self, n: int | None = None) -> bytes:
        data = await self.stream.read(n)
        if data:
            self.traffic.bytes_in(self.protocol, len(data))
        return data

    async def write(self, data: bytes) -> None:
        await self.stream.write(data)
        self.traffic.bytes_out(self.protocol, len(data))

    async def close(self) -> None:
        await self.stream.close()

    async def reset(self) -> None:
        await self.stream.reset()

    def get_protocol(self) -> TProtocol | None:
        return self.stream.get_protocol()

    def set_protocol(self, protocol_id: TProtocol) -> None:
        self.stream.set_protocol(protocol_id)

    def get_remote_address(self) -> tuple[str, int] | None:
        return self.stream.get_remote_address()

    def __getattr__(self, name: str) -> Any:  # the rest of the stream's API passes through
        if name == "stream":
            raise AttributeError(name)
        return getattr(self.stream, name)
