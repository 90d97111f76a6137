"""FastNoiseSession against py-libp2p's stock Noise session: same wire, both directions.

Unit tests run both sessions over an in-memory pipe that hands out bytes in random piece
sizes (so lengths and ciphertexts straddle reads); the host tests connect one of our hosts
to a host built from py-libp2p's stock Noise transport and stock yamux, each way round.
"""

from __future__ import annotations

import os
import random

import pytest
import trio
from libp2p import new_host
from libp2p.crypto.x25519 import create_new_key_pair as create_x25519_key_pair
from libp2p.custom_types import TProtocol
from libp2p.io.exceptions import IncompleteReadError
from libp2p.peer.id import ID
from libp2p.peer.peerinfo import PeerInfo
from libp2p.security.noise.io import MAX_PLAINTEXT_LENGTH, NoiseTransportReadWriter
from libp2p.security.noise.transport import PROTOCOL_ID as NOISE_PROTOCOL_ID
from libp2p.security.noise.transport import Transport as NoiseTransport
from libp2p.security.secure_session import SecureSession
from libp2p.stream_muxer.yamux.yamux import PROTOCOL_ID as YAMUX_PROTOCOL_ID
from libp2p.stream_muxer.yamux.yamux import Yamux
from multiaddr import Multiaddr
from noise.connection import Keypair, NoiseConnection
from noise.exceptions import NoiseInvalidMessage

from protocol.p2p.host import build_host, key_pair_from_seed
from protocol.p2p.noise_session import FastNoiseSession

from .conftest import admit_all, identity

SIZES = [1, 12, 4096, MAX_PLAINTEXT_LENGTH, MAX_PLAINTEXT_LENGTH + 1, 1_048_292, 2_500_003]


def _handshaken() -> tuple[NoiseConnection, NoiseConnection]:
    """Initiator and responder Noise states after a real XX handshake in memory."""
    sides = []
    for initiator in (True, False):
        state = NoiseConnection.from_name(b"Noise_XX_25519_ChaChaPoly_SHA256")
        state.set_as_initiator() if initiator else state.set_as_responder()
        state.set_keypair_from_private_bytes(Keypair.STATIC, os.urandom(32))
        state.start_handshake()
        sides.append(state)
    init, resp = sides
    resp.read_message(init.write_message())
    init.read_message(resp.write_message())
    resp.read_message(init.write_message())
    assert init.handshake_finished and resp.handshake_finished
    return init, resp


class _Pipe:
    """Raw connection: writes are appended; reads return at most a random piece (EOF when
    drained), so the reader sees lengths and ciphertexts cut anywhere."""

    is_initiator = True

    def __init__(self, seed: int, max_piece: int = 200_000) -> None:
        self.buf = bytearray()
        self.writes = 0
        self.rng = random.Random(seed)
        self.max_piece = max_piece

    async def write(self, data: bytes) -> None:
        self.buf += data
        self.writes += 1

    async def read(self, n: int | None = None) -> bytes:
        await trio.lowlevel.checkpoint()
        take = min(len(self.buf), self.rng.randint(1, self.max_piece), n or len(self.buf))
        out = bytes(self.buf[:take])
        del self.buf[:take]
        return out


def _session(state: NoiseConnection, pipe: _Pipe, fast: bool) -> SecureSession:
    peer = ID(b"\x00\x01x")
    key = create_x25519_key_pair()
    stock = SecureSession(
        local_peer=peer,
        local_private_key=key.private_key,
        remote_peer=peer,
        remote_permanent_pubkey=key.public_key,
        is_initiator=True,
        conn=NoiseTransportReadWriter(pipe, state),  # type: ignore[arg-type]
    )
    return FastNoiseSession(stock, pipe) if fast else stock  # type: ignore[arg-type]


async def _read_all(session: SecureSession, total: int, seed: int) -> bytes:
    """`total` bytes through a random mix of read(None) and read(n) calls."""
    rng = random.Random(seed)
    got = bytearray()
    while len(got) < total:
        n = rng.choice([None, 1, 12, 4096, MAX_PLAINTEXT_LENGTH, 1_048_292, 3_000_000])
        got += await session.read(None if n is None else min(n, total - len(got)))
    return bytes(got)


@pytest.mark.trio
@pytest.mark.parametrize("writer_fast", [False, True], ids=["stock-to-fast", "fast-to-stock"])
async def test_fast_session_interoperates_with_the_stock_one(writer_fast):
    init, resp = _handshaken()
    pipe = _Pipe(seed=7)
    writer = _session(init, pipe, fast=writer_fast)
    reader = _session(resp, pipe, fast=not writer_fast)
    payloads = [os.urandom(n) for n in SIZES]
    for payload in payloads:
        await writer.write(payload)
    if writer_fast:
        assert pipe.writes == len(SIZES)  # one raw write per session write
    else:
        assert pipe.writes > len(SIZES)  # the stock writer: one per Noise message
    expected = b"".join(payloads)
    assert await _read_all(reader, len(expected), seed=3) == expected
    assert not pipe.buf  # every byte consumed, nothing left over


@pytest.mark.trio
async def test_an_empty_write_is_one_empty_message_as_with_the_stock_writer():
    # (yamux never writes empty: every frame has a 12-byte header; this pins the shape)
    for fast in (False, True):
        init, _ = _handshaken()
        pipe = _Pipe(seed=0)
        await _session(init, pipe, fast=fast).write(b"")
        assert pipe.writes == 1 and len(pipe.buf) == 2 + 16  # length + Poly1305 tag


@pytest.mark.trio
async def test_connection_end_is_clean_only_between_messages():
    init, resp = _handshaken()
    pipe = _Pipe(seed=1)
    writer = _session(init, pipe, fast=False)
    await writer.write(b"a" * 100)
    reader = _session(resp, pipe, fast=True)
    assert await reader.read(100) == b"a" * 100
    with pytest.raises(IncompleteReadError) as between:
        await reader.read(12)
    assert between.value.is_clean_close

    await writer.write(b"b" * 5000)
    del pipe.buf[-10:]  # the last message loses its tail
    with pytest.raises(IncompleteReadError) as inside:
        await reader.read(12)
    assert not inside.value.is_clean_close


@pytest.mark.trio
async def test_tampered_ciphertext_is_rejected():
    init, resp = _handshaken()
    pipe = _Pipe(seed=2)
    await _session(init, pipe, fast=True).write(b"x" * 1000)
    pipe.buf[500] ^= 1
    with pytest.raises(NoiseInvalidMessage):
        await _session(resp, pipe, fast=True).read(1000)


def _stock_host(i: int):  # type: ignore[no-untyped-def]
    """A host from py-libp2p's stock Noise transport and stock yamux."""
    kp = key_pair_from_seed(identity(i).seed)
    noise = NoiseTransport(kp, noise_privkey=create_x25519_key_pair().private_key)
    return new_host(
        key_pair=kp,
        sec_opt={TProtocol(NOISE_PROTOCOL_ID): noise},
        muxer_opt={TProtocol(YAMUX_PROTOCOL_ID): Yamux},
    )


ECHO = TProtocol("/veritrain-test/echo/1.0.0")


@pytest.mark.trio
@pytest.mark.parametrize("ours_dials", [True, False], ids=["ours-dials-stock", "stock-dials-ours"])
async def test_our_host_and_a_stock_host_exchange_bytes_both_ways(ours_dials):
    ours, stock = build_host(identity(40), admit=admit_all), _stock_host(41)
    dialer, listener = (ours, stock) if ours_dials else (stock, ours)
    payload = os.urandom(3_000_001)

    async def echo(stream) -> None:  # type: ignore[no-untyped-def]
        got = bytearray()
        while len(got) < len(payload):
            got += await stream.read(1 << 20)
        await stream.write(bytes(got))
        await stream.close()

    listener.set_stream_handler(ECHO, echo)
    addr = [Multiaddr("/ip4/127.0.0.1/tcp/0")]
    with trio.fail_after(30):
        async with dialer.run(addr), listener.run(addr):
            await dialer.connect(PeerInfo(listener.get_id(), listener.get_addrs()))
            stream = await dialer.new_stream(listener.get_id(), [ECHO])
            await stream.write(payload)
            back = bytearray()
            while len(back) < len(payload):
                back += await stream.read(1 << 20)
            await stream.close()
    assert bytes(back) == payload
