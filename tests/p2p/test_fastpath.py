"""The transfer fast path: read-ahead under Noise, write sizing, buffered stream reads.

These also pin the py-libp2p internals the fast path is sized by: if an upgrade changes
them, a test here fails instead of throughput silently dropping.
"""

from __future__ import annotations

import inspect
import os
import random

import pytest
import trio
from libp2p.security.noise.io import MAX_PLAINTEXT_LENGTH
from libp2p.security.noise.transport import Transport as NoiseTransport
from libp2p.stream_muxer.yamux import yamux

from protocol.p2p import framing
from protocol.p2p.bufconn import BufferedNoiseTransport, ReadAheadConnection
from protocol.p2p.config import CHUNK_SIZE
from protocol.p2p.errors import TransferTimeout, TruncatedStream
from protocol.p2p.host import build_host

from .conftest import identity


class _FakeConn:
    """A raw connection that hands out `data` in the sizes the reader asks for, or fewer."""

    is_initiator = True

    def __init__(self, data: bytes, max_piece: int) -> None:
        self.data, self.max_piece, self.calls = data, max_piece, 0

    async def read(self, n: int | None = None) -> bytes:
        self.calls += 1
        take = min(self.max_piece, len(self.data) if n is None else n)
        out, self.data = self.data[:take], self.data[take:]
        return out

    async def write(self, data: bytes) -> None:
        self.written = data

    def conn_state(self) -> dict[str, str]:
        return {"transport": "fake"}


@pytest.mark.trio
async def test_read_ahead_returns_the_same_bytes_with_fewer_reads():
    data = os.urandom(300_000)
    raw = _FakeConn(data, max_piece=1 << 20)
    conn = ReadAheadConnection(raw, read_ahead=100_000)  # type: ignore[arg-type]
    rng = random.Random(1)
    got = bytearray()
    reads = 0
    while len(got) < len(data):
        got += await conn.read(rng.choice([2, 17, 4096, 65535, None]))
        reads += 1
    assert bytes(got) == data
    assert raw.calls == 3 < reads  # three 100 kB fetches served every read
    assert await conn.read(10) == b""  # EOF passes through
    await conn.write(b"x")
    assert raw.written == b"x"
    assert conn.conn_state() == {"transport": "fake"}


def test_noise_hooks_the_read_ahead_relies_on_still_exist():
    for name in ("secure_inbound", "secure_outbound"):
        params = list(inspect.signature(getattr(NoiseTransport, name)).parameters)
        assert params[:2] == ["self", "conn"], (name, params)
    host = build_host(identity(0))
    secure = host.get_network().upgrader.security_multistream.transports  # type: ignore[attr-defined]
    assert [type(t) for t in secure.values()] == [BufferedNoiseTransport]


def test_write_size_fills_one_yamux_frame_in_one_noise_message():
    # A write of WRITE_SIZE bytes becomes one yamux frame (12-byte header) whose bytes are
    # exactly one Noise message's plaintext; yamux frames carry up to 64 KiB - 12.
    assert framing.WRITE_SIZE + yamux.HEADER_SIZE == MAX_PLAINTEXT_LENGTH == 65535 - 16
    assert framing.WRITE_SIZE <= yamux.MAX_MESSAGE_SIZE - yamux.HEADER_SIZE
    chunk = os.urandom(CHUNK_SIZE)
    pieces = list(framing.chunk_pieces(chunk))
    assert all(len(p) <= framing.WRITE_SIZE for p in pieces)
    assert b"".join(pieces) == framing.encode_chunk_header(CHUNK_SIZE) + chunk
    assert b"".join(framing.chunk_pieces(b"abc")) == framing.encode_chunk_header(3) + b"abc"


class _FakeStream:
    def __init__(self, pieces: list[bytes], hang: bool = False) -> None:
        self.pieces, self.hang, self.asked = pieces, hang, []

    async def read(self, n: int | None = None) -> bytes:
        self.asked.append(n)
        if not self.pieces:
            if self.hang:
                await trio.sleep_forever()
            return b""
        return self.pieces.pop(0)


@pytest.mark.trio
async def test_stream_reader_crosses_frame_boundaries_and_bounds_each_read():
    payload = framing.encode_chunk_header(5) + b"hello" + framing.encode_chunk_header(2) + b"!!"
    stream = _FakeStream([payload[:3], payload[3:8], payload[8:11], payload[11:]])
    reader = framing.StreamReader(stream, timeout_s=1.0)  # type: ignore[arg-type]
    assert await framing.read_chunk_len(reader, 7) == 5
    assert bytes(await reader.some(3)) == b"hel"  # never more than asked for
    assert bytes(await reader.some(2)) == b"l"  # nor more than one read returned
    assert bytes(await reader.some(1)) == b"o"  # the rest of that read stays buffered
    assert await framing.read_chunk_len(reader, 2) == 2
    assert bytes(await reader.some(10)) == b"!!"
    assert set(stream.asked) == {framing.READ_SIZE}
    with pytest.raises(TruncatedStream):
        await reader.some(1)
    hanging = framing.StreamReader(_FakeStream([], hang=True), timeout_s=0.2)  # type: ignore[arg-type]
    with trio.fail_after(2):
        with pytest.raises(TransferTimeout):
            await hanging.exactly(4)

