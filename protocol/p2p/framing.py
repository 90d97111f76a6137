"""Blob protocol framing (see INTEROP.md). All integers are big-endian.

    request  := u32 len (<= MAX_REQUEST_BYTES) || JSON (BlobRequest | CheckpointRequest)
    response := u8 status || (status == OK ? ok_body : u16 len || UTF-8 reason)
    ok_body  := u64 blob_len || blake3(blob) (32) || u32 proof_len || proof || chunk*
    chunk    := u32 len (1..CHUNK_SIZE) || bytes        -- chunks add up to exactly blob_len

Every read goes through `read_exactly`/`read_some` under `trio.fail_after`, because a frozen
peer makes a libp2p read hang forever (DESIGN §2). Every length is checked against its cap
before anything is allocated.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum

import pydantic
import trio
from libp2p.abc import INetStream

from protocol.messages import REQUEST_ADAPTER, BlobRequest, CheckpointRequest, MalformedMessage
from protocol.p2p.config import CHUNK_SIZE
from protocol.p2p.errors import (
    BlobNotFound,
    FrameTooLarge,
    P2PError,
    PeerRefused,
    RateLimited,
    RemoteError,
    TransferTimeout,
    TruncatedStream,
)
from protocol.p2p.host import NET_ERRORS

BLOB_PROTOCOL_ID = "/veritrain/blob/1.0.0"
MAX_REQUEST_BYTES = 1024  # a request is ~150 bytes of JSON
MAX_REASON_BYTES = 1024
MAX_PROOF_BYTES = 1 << 20  # a Merkle proof over <= 2^32 leaves is ~1 KiB; generous cap
HASH_LEN = 32
_OK_HEAD = struct.Struct(">Q32sI")


class Status(IntEnum):
    OK = 0
    NOT_FOUND = 1
    REFUSED = 2  # requester's node key is not registered
    RATE_LIMITED = 3  # over its request budget or concurrent-stream cap
    BAD_REQUEST = 4  # request did not parse
    TOO_LARGE = 5  # request frame over MAX_REQUEST_BYTES
    BUSY = 6  # server is at its global stream cap
    INTERNAL = 7


_STATUS_ERRORS: dict[int, type[P2PError]] = {
    Status.NOT_FOUND: BlobNotFound,
    Status.REFUSED: PeerRefused,
    Status.RATE_LIMITED: RateLimited,
    Status.BUSY: RateLimited,
    Status.TOO_LARGE: FrameTooLarge,
}


def status_error(status: int, reason: str) -> P2PError:
    """The typed error a client raises for a non-OK status."""
    cls = _STATUS_ERRORS.get(status, RemoteError)
    return cls(f"remote answered {Status(status).name if status in Status._value2member_map_ else status}: {reason}")


@dataclass(frozen=True)
class OkHead:
    blob_len: int
    blob_hash: bytes
    proof: bytes


def encode_request(request: BlobRequest | CheckpointRequest) -> bytes:
    body = request.model_dump_json().encode()
    return struct.pack(">I", len(body)) + body


def decode_request(body: bytes) -> BlobRequest | CheckpointRequest:
    try:
        return REQUEST_ADAPTER.validate_json(body)
    except pydantic.ValidationError as exc:
        raise MalformedMessage(f"bad blob request: {exc.error_count()} errors") from exc


def encode_error(status: Status, reason: str) -> bytes:
    raw = reason.encode()[:MAX_REASON_BYTES]
    return struct.pack(">BH", status, len(raw)) + raw


def encode_ok_head(blob_len: int, blob_hash: bytes, proof: bytes) -> bytes:
    return bytes([Status.OK]) + _OK_HEAD.pack(blob_len, blob_hash, len(proof)) + proof


def encode_chunk_header(n: int) -> bytes:
    return struct.pack(">I", n)


async def read_some(stream: INetStream, max_n: int, timeout_s: float) -> bytes:
    """One read of at most `max_n` bytes; TransferTimeout / TruncatedStream on failure."""
    try:
        with trio.fail_after(timeout_s):
            data = await stream.read(max_n)
    except trio.TooSlowError as exc:
        raise TransferTimeout(f"no data from peer within {timeout_s} s") from exc
    except NET_ERRORS as exc:
        raise TruncatedStream(f"stream ended early: {type(exc).__name__}") from exc
    if not data:
        raise TruncatedStream("stream closed early")
    return data


async def read_exactly(stream: INetStream, n: int, timeout_s: float) -> bytes:
    """Exactly `n` bytes (n is always small and capped by the caller)."""
    buf = bytearray()
    while len(buf) < n:
        buf += await read_some(stream, n - len(buf), timeout_s)
    return bytes(buf)


async def read_request(stream: INetStream, timeout_s: float) -> BlobRequest | CheckpointRequest:
    (length,) = struct.unpack(">I", await read_exactly(stream, 4, timeout_s))
    if length > MAX_REQUEST_BYTES:
        raise FrameTooLarge(f"request frame {length} bytes > {MAX_REQUEST_BYTES}")
    return decode_request(await read_exactly(stream, length, timeout_s))


async def read_head(stream: INetStream, timeout_s: float, max_blob: int) -> OkHead:
    """Read the status and OK header; raise the typed error of any other status."""
    status = (await read_exactly(stream, 1, timeout_s))[0]
    if status != Status.OK:
        (length,) = struct.unpack(">H", await read_exactly(stream, 2, timeout_s))
        if length > MAX_REASON_BYTES:
            raise FrameTooLarge(f"refusal reason {length} bytes > {MAX_REASON_BYTES}")
        reason = (await read_exactly(stream, length, timeout_s)).decode(errors="replace")
        raise status_error(status, reason)
    blob_len, blob_hash, proof_len = _OK_HEAD.unpack(
        await read_exactly(stream, _OK_HEAD.size, timeout_s)
    )
    if blob_len > max_blob:
        raise FrameTooLarge(f"announced blob of {blob_len} bytes > max {max_blob}")
    if proof_len > MAX_PROOF_BYTES:
        raise FrameTooLarge(f"proof of {proof_len} bytes > {MAX_PROOF_BYTES}")
    proof = await read_exactly(stream, proof_len, timeout_s)
    return OkHead(blob_len=blob_len, blob_hash=blob_hash, proof=proof)


async def read_chunk_len(stream: INetStream, remaining: int, timeout_s: float) -> int:
    (n,) = struct.unpack(">I", await read_exactly(stream, 4, timeout_s))
    if n == 0 or n > CHUNK_SIZE:
        raise FrameTooLarge(f"chunk of {n} bytes outside 1..{CHUNK_SIZE}")
    if n > remaining:
        raise FrameTooLarge(f"chunk of {n} bytes overruns the announced length")
    return n
