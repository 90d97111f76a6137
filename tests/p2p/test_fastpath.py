"""The transfer fast path: read-ahead under Noise, write sizing, buffered stream reads.

These also pin the py-libp2p internals the fast path is sized by: if an upgrade changes
them, a test here fails instead of throughput silently dropping.
"""

from __future__ import annotations

import inspect
import os
import random
import struct

import pytest
import trio
from libp2p.security.noise.io import MAX_PLAINTEXT_LENGTH
from libp2p.security.noise.transport import Transport as NoiseTransport
from libp2p.stream_muxer.yamux import yamux

from protocol.p2p import framing, yamux_tuning
from protocol.p2p.bufconn import BufferedNoiseTransport, ReadAheadConnection
from protocol.p2p.config import CHUNK_SIZE
from protocol.p2p.errors import TransferTimeout, TruncatedStream
from protocol.p2p.host import build_host

from .conftest import admit_all, cluster, identity


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
    host = build_host(identity(0), admit=admit_all)
    secure = host.get_network().upgrader.security_multistream.transports  # type: ignore[attr-defined]
    assert [type(t) for t in secure.values()] == [BufferedNoiseTransport]


def test_write_size_fills_one_yamux_frame_with_whole_noise_messages():
    # A write of WRITE_SIZE bytes becomes one yamux frame (12-byte header) whose bytes are
    # exactly NOISE_MESSAGES_PER_FRAME full Noise plaintexts; a sent chunk (u32 header +
    # SEND_CHUNK_SIZE bytes) is exactly one such write. Frames are larger than the spec's
    # initial window but within what receivers auto-tune to; the writer cuts them to the
    # window granted (test below).
    assert MAX_PLAINTEXT_LENGTH == 65535 - 16
    assert framing.WRITE_SIZE + yamux.HEADER_SIZE == yamux_tuning.FRAME_SIZE
    assert yamux_tuning.FRAME_SIZE % MAX_PLAINTEXT_LENGTH == 0
    assert yamux_tuning.INITIAL_WINDOW == yamux.DEFAULT_WINDOW_SIZE
    assert yamux_tuning.FRAME_SIZE <= yamux_tuning.MAX_WINDOW == yamux.MAX_WINDOW_SIZE
    assert framing.SEND_CHUNK_SIZE + 4 == framing.WRITE_SIZE
    assert framing.SEND_CHUNK_SIZE <= CHUNK_SIZE  # readers take any chunk of 1..CHUNK_SIZE
    sent = os.urandom(framing.SEND_CHUNK_SIZE)
    assert list(framing.chunk_pieces(sent)) == [framing.encode_chunk_header(len(sent)) + sent]
    chunk = os.urandom(CHUNK_SIZE)
    pieces = list(framing.chunk_pieces(chunk))
    assert all(len(p) <= framing.WRITE_SIZE for p in pieces)
    assert b"".join(pieces) == framing.encode_chunk_header(CHUNK_SIZE) + chunk
    assert b"".join(framing.chunk_pieces(b"abc")) == framing.encode_chunk_header(3) + b"abc"


class _FrameSink:
    """The `Yamux` side a `YamuxStream.write` uses: records each DATA frame's payload size
    and the send window left after it (never negative: no frame exceeds the window)."""

    def __init__(self) -> None:
        self.frames: list[tuple[int, int]] = []
        self.stream: yamux.YamuxStream | None = None

    async def _write_frame(self, data: bytes) -> None:
        _, typ, _, _, length = struct.unpack(yamux.YAMUX_HEADER_FORMAT, data[: yamux.HEADER_SIZE])
        assert typ == yamux.TYPE_DATA and length == len(data) - yamux.HEADER_SIZE
        assert self.stream is not None
        self.frames.append((length, self.stream.send_window))


@pytest.mark.trio
async def test_yamux_frame_patch_applies_and_the_writer_still_honours_the_send_window():
    build_host(identity(0), admit=admit_all)  # applies the patch
    assert yamux.MAX_MESSAGE_SIZE == yamux_tuning.FRAME_SIZE
    # the internals the patch relies on: the writer reads MAX_MESSAGE_SIZE at call time and
    # cuts each frame to min(send window, MAX_MESSAGE_SIZE - header, rest)
    assert "MAX_MESSAGE_SIZE" in inspect.getsource(yamux.YamuxStream.write)
    sink = _FrameSink()
    stream = yamux.YamuxStream(1, sink, True)  # type: ignore[arg-type]
    sink.stream = stream
    assert stream.send_window == yamux_tuning.INITIAL_WINDOW
    stream.send_window = 100_000  # a peer that has granted less than one full frame
    data = os.urandom(3 * framing.WRITE_SIZE)

    async def grant_later() -> None:
        await trio.sleep(0.05)
        async with stream.window_lock:
            stream.send_window += 4 * framing.WRITE_SIZE

    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(grant_later)
            await stream.write(data)
    sizes = [n for n, _ in sink.frames]
    assert sum(sizes) == len(data)
    assert sizes[0] == 100_000  # cut to the window, then waited for the grant
    assert max(sizes) == framing.WRITE_SIZE  # full frames once the window allows
    assert all(left >= 0 for _, left in sink.frames)


@pytest.mark.trio
@pytest.mark.parametrize("frame_size", [64 * 1024, yamux_tuning.FRAME_SIZE])
async def test_blob_crosses_with_default_and_large_yamux_frames(tmp_path, monkeypatch, frame_size):
    # 64 KiB is what go/js/rust peers (and unpatched py-libp2p) send; our receiver must take
    # those as well as our own larger frames.
    sent: list[int] = []
    write_frame = yamux.Yamux._write_frame

    async def recording(self: yamux.Yamux, data: bytes) -> None:
        if data[1] == yamux.TYPE_DATA:
            sent.append(len(data))
        await write_frame(self, data)

    monkeypatch.setattr(yamux.Yamux, "_write_frame", recording)
    with trio.fail_after(60):
        async with cluster(tmp_path, 2) as c:
            monkeypatch.setattr(yamux, "MAX_MESSAGE_SIZE", frame_size)  # after build_host
            server, client = c.nodes
            data = os.urandom(4 * CHUNK_SIZE + 5)
            h = c.stores[0].put(data)
            path = await client.fetch_blob(server.identity.public_key, h, store=c.stores[1])
            assert path.read_bytes() == data
    assert max(sent) == frame_size


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

