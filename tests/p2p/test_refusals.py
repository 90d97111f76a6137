"""A refused blob request ends at once, over real hosts on 127.0.0.1 and the real blob protocol.

On every refusal after the request was sent (not yet revealed, not held, malformed, too large,
over the request rate, over the peer's stream cap, server at capacity) the requester reads the
status and then the stream's end, without waiting on any timeout; and the node does not keep
its side open for a requester that never closes its own (a js-libp2p client once waited 30 s)."""

from __future__ import annotations

import os
import struct
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
from libp2p.exceptions import BaseLibp2pError

from protocol.core.wire.messages import BlobRequest, to_hex
from protocol.node.store import DataDir
from protocol.p2p import DirectoryBlobSource, P2PNode, RatePolicy, RegistryView
from protocol.p2p.blob_streams import PROTOCOL
from protocol.p2p.framing import Status, encode_request

from .conftest import CHAIN_ID, CONTRACT, RoundClock, entry_for, identity, p2p_config

# The server reads under a 30 s timeout here, so a refusal that waited on a read would take
# 30 s; every stream must end within END_BOUND_S, 6x under it (it takes milliseconds).
SERVER_READ_TIMEOUT_S = 30.0
END_BOUND_S = 5.0
ROUND = 5


def _request(blob_hash: bytes) -> bytes:
    return encode_request(BlobRequest(hash=to_hex(blob_hash)))


# case -> (server config overrides, the request, the status it is refused with)
CASES: dict[str, tuple[dict[str, Any], bytes, Status]] = {
    "not yet revealed": ({}, b"embargoed", Status.NOT_FOUND),
    "not held": ({}, _request(b"\x01" * 32), Status.NOT_FOUND),
    "malformed": ({}, struct.pack(">I", 9) + b"\xff" * 9, Status.BAD_REQUEST),
    "too large": ({}, struct.pack(">I", 10**6) + b"{", Status.TOO_LARGE),
    # a bucket of one request: the probe first spends it
    "over the request rate": ({"rate_policy": RatePolicy(base_requests_per_s=0.001)},
                              _request(b"\x01" * 32), Status.RATE_LIMITED),
    "over the peer's stream cap": ({"rate_policy": RatePolicy(max_concurrent_streams=0)},
                                   _request(b"\x01" * 32), Status.RATE_LIMITED),
    "server at capacity": ({"max_inbound_streams": 0}, _request(b"\x01" * 32), Status.BUSY),
}


@asynccontextmanager
async def server_and_requester(tmp_path: Path, **config: Any) -> AsyncIterator[tuple[P2PNode, P2PNode, bytes]]:
    """A server whose data dir holds one blob of the current round, embargoed (its commit
    phase has not closed), and a requester connected to it; yields (server, requester, hash)."""
    data = DataDir(tmp_path / "server")
    embargoed = data.blobs.put(os.urandom(1000))
    data.state.embargo(ROUND, [embargoed])
    regs = [RegistryView(CHAIN_ID, CONTRACT) for _ in range(2)]
    clock = RoundClock(ROUND)
    server = P2PNode(identity(0), p2p_config(read_timeout_s=SERVER_READ_TIMEOUT_S, **config), regs[0],
                     data, data, current_round=clock)
    requester = P2PNode(identity(1), p2p_config(), regs[1], DirectoryBlobSource(tmp_path / "req"),
                        current_round=clock)
    async with server.run(), requester.run():
        for reg in regs:
            for i, node in enumerate((server, requester)):
                reg.upsert(entry_for(i, node.listen_addr))
        await requester.connect(server.p2p_addr)
        yield server, requester, embargoed


async def read_to_end(stream: Any) -> tuple[bytes, str]:
    """Everything the stream carries, and how it ended ("eof" or the error's name)."""
    out = b""
    try:
        while chunk := await stream.read(65536):
            out += chunk
    except BaseLibp2pError as exc:
        return out, "eof" if isinstance(exc, EOFError) else type(exc).__name__
    return out, "eof"


def still_open(node: P2PNode, peer: P2PNode, stream: Any) -> bool:
    """Whether `node`'s side of `peer`'s `stream` is still open (not yet closed or reset)."""
    sid = stream.muxed_stream.stream_id
    return any(not conn.muxed_conn.streams[sid].closed
               for conn in node.host.get_network().get_connections(peer.peer_id)
               if sid in conn.muxed_conn.streams)


@pytest.mark.trio
@pytest.mark.parametrize("case", list(CASES))
async def test_a_refused_request_ends_at_once_and_the_node_keeps_nothing_open(tmp_path, case):
    overrides, request, status = CASES[case]
    with trio.fail_after(60):
        async with server_and_requester(tmp_path, **overrides) as (server, requester, embargoed):
            if request == b"embargoed":
                request = _request(embargoed)
            if status is Status.RATE_LIMITED and "rate" in case:
                stream = await requester.host.new_stream(server.peer_id, [PROTOCOL])
                await stream.write(_request(b"\x02" * 32))  # spends the one request
                assert (await read_to_end(stream))[0][0] == Status.NOT_FOUND
            stream = await requester.host.new_stream(server.peer_id, [PROTOCOL])
            await stream.write(request)  # and keeps its side open, as a careless client would
            with trio.fail_after(END_BOUND_S):
                answer, end = await read_to_end(stream)
            assert answer[0] == status, (case, answer)
            assert end == "eof", end  # the status, then the end: not a reset that might drop it
            assert server.server.refusals[status.name] >= 1
            # the node never reads the rest of a refused stream: it does not wait for it either
            with trio.fail_after(END_BOUND_S):
                while still_open(server, requester, stream):
                    await trio.sleep(0.02)
