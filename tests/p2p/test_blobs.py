"""Blob protocol over real hosts: integrity, atomic storage, and hostile servers/clients."""

from __future__ import annotations

import os
import struct

import blake3
import pytest
import trio
from libp2p.exceptions import BaseLibp2pError

from protocol.core.crypto.hashing import content_hash
from protocol.core.wire.messages import BlobRequest, to_hex
from protocol.p2p import framing
from protocol.p2p.blob_streams import PROTOCOL
from protocol.p2p.config import CHUNK_SIZE
from protocol.p2p.errors import (
    BlobHashMismatch,
    BlobNotFound,
    FrameTooLarge,
    MalformedMessage,
    P2PError,
    RemoteError,
    TruncatedStream,
)

from .conftest import cluster

MB = 1024 * 1024


def _no_partials(store) -> None:
    assert not [p for p in store.root.iterdir() if p.name.startswith(".partial-")]


@pytest.mark.trio
async def test_50mb_blob_arrives_intact_and_is_stored_atomically(tmp_path):
    with trio.fail_after(120):
        async with cluster(tmp_path, 2) as c:
            server, client = c.nodes
            data = os.urandom(50 * MB + 123)
            h = c.stores[0].put(data)
            path = await client.fetch_blob(server.identity.public_key, h, store=c.stores[1])
            assert path == c.stores[1].path_for(h)
            assert blake3.blake3(path.read_bytes()).digest() == h
            _no_partials(c.stores[1])
            # already held: answered from the store, no transfer
            assert await client.fetch_blob(server.identity.public_key, h, c.stores[1]) == path


@pytest.mark.trio
async def test_checkpoint_comes_with_its_proof(tmp_path):
    with trio.fail_after(30):
        async with cluster(tmp_path, 2) as c:
            server, client = c.nodes
            root = blake3.blake3(b"root").digest()
            c.checkpoints[0].add(7, root, 3, b"checkpoint-bytes" * 1000, b"proof-bytes")
            ck = await client.fetch_checkpoint(server.identity.public_key, 7, root, 3)
            assert ck.data == b"checkpoint-bytes" * 1000 and ck.proof == b"proof-bytes"
            assert ck.blob_hash == content_hash(ck.data)
            with pytest.raises(BlobNotFound):
                await client.fetch_checkpoint(server.identity.public_key, 7, root, 4)
            with pytest.raises(BlobNotFound):
                await client.fetch_blob(server.identity.public_key, b"\x01" * 32)


def _ok_head(n: int, h: bytes) -> bytes:
    return framing.encode_ok_head(n, h, b"")


def _evil_responses(data: bytes, h: bytes) -> dict[str, tuple[bytes, type[P2PError]]]:
    chunk = framing.encode_chunk_header(len(data)) + data
    return {
        "chunk over 1 MiB": (
            _ok_head(2 * MB, h) + struct.pack(">I", 2 * MB) + b"x" * 1000,
            FrameTooLarge,
        ),
        "blob over max size": (_ok_head(1 << 40, h), FrameTooLarge),
        "announces another hash": (_ok_head(len(data), b"\x02" * 32) + chunk, BlobHashMismatch),
        # flip a bit of the last byte: replacing it with a constant matched 1 run in 256
        "bytes do not match hash": (
            _ok_head(len(data), h) + chunk[:-1] + bytes([chunk[-1] ^ 1]),
            BlobHashMismatch,
        ),
        "garbage": (b"\x00" + os.urandom(3), TruncatedStream),
        "garbage status": (b"\x63\x00\x05hello", RemoteError),
        "truncated": (_ok_head(len(data), h) + chunk[: len(chunk) // 2], TruncatedStream),
        "chunk overruns length": (
            _ok_head(10, h) + framing.encode_chunk_header(20) + b"y" * 20,
            FrameTooLarge,
        ),
        "empty": (b"", TruncatedStream),
    }


@pytest.mark.trio
async def test_client_rejects_hostile_servers_and_stores_nothing(tmp_path):
    data = os.urandom(CHUNK_SIZE // 2)
    h = content_hash(data)
    with trio.fail_after(60):
        async with cluster(tmp_path, 3) as c:
            evil, client, honest = c.nodes
            c.stores[2].put(data)
            for name, (response, err) in _evil_responses(data, h).items():

                async def handler(stream, response=response):
                    try:
                        await framing.read_request(stream, 2.0)
                        await stream.write(response)
                        await stream.close()
                    except BaseLibp2pError:
                        pass  # the client hung up on us, as it should

                evil.host.set_stream_handler(PROTOCOL, handler)
                with pytest.raises(err) as info:
                    await client.fetch_blob(evil.identity.public_key, h, store=c.stores[1])
                assert c.stores[1].get(h) is None, name
                _no_partials(c.stores[1])
                if err is RemoteError:  # an unknown status is still a typed error
                    assert "remote answered" in str(info.value)
            # the client node is fine and fetches the real blob from an honest peer
            got = await client.fetch_blob_any(
                [evil.identity.public_key, honest.identity.public_key], h, store=c.stores[1]
            )
            assert got.read_bytes() == data


async def _raw_exchange(client, server, payload: bytes) -> bytes:
    stream = await client.host.new_stream(server.peer_id, [PROTOCOL])
    await stream.write(payload)
    out = b""
    with trio.move_on_after(3):
        try:
            while chunk := await stream.read(1024):
                out += chunk
        except Exception:  # noqa: BLE001 - the server may reset; we only look at what came
            pass
    return out


@pytest.mark.trio
async def test_server_survives_hostile_clients(tmp_path):
    data = os.urandom(100_000)
    with trio.fail_after(60):
        async with cluster(tmp_path, 2, read_timeout_s=1.0) as c:
            server, client = c.nodes
            h = c.stores[0].put(data)
            await client.connect(server.p2p_addr)
            cases = {
                struct.pack(">I", 10**6) + b"{": framing.Status.TOO_LARGE,
                struct.pack(">I", 9) + b"\xff" * 9: framing.Status.BAD_REQUEST,
                struct.pack(">I", 40) + b'{"kind":"blob","hash":"0x00","extra":1}  ': (
                    framing.Status.BAD_REQUEST
                ),
            }
            for payload, status in cases.items():
                out = await _raw_exchange(client, server, payload)
                assert out[:1] == bytes([status]), payload
            # truncated request: the server times out the read and moves on
            assert await _raw_exchange(client, server, b"\x00\x00") == b""
            # raw TCP garbage at the listen port (not even multistream)
            host, port = server.listen_addr.split("/")[2], int(server.listen_addr.split("/")[4])
            sock = await trio.open_tcp_stream(host, port)
            await sock.send_all(os.urandom(4096))
            await sock.aclose()
            assert await client.fetch_blob(server.identity.public_key, h) == data
            assert server.server.active == 0


def test_request_codec_is_strict():
    ok = framing.encode_request(BlobRequest(hash=to_hex(b"\x01" * 32)))
    assert framing.decode_request(ok[4:]).hash == to_hex(b"\x01" * 32)
    with pytest.raises(MalformedMessage):
        framing.decode_request(b'{"schema_version":2,"kind":"blob","hash":"0x' + b"1" * 64 + b'"}')
