"""The submission blob a miner serves: a strict header (who, where, the trace) + the update.

Its blake3 content hash is the `update_hash` committed on chain. The header names the
chain, the rounds contract (the one `commit_update` goes to), the round and the miner's address, so the hash is bound
to the committer: a front-runner who copies the commitment can never open it, because
the blob it would have to serve names someone else (docs/PROTOCOL.md).

Layout: magic (8 bytes) ‖ header length (u32, big-endian) ‖ header JSON ‖ update bytes.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Protocol

from pydantic import ValidationError

from protocol.core.crypto.hashing import (
    Digest,
    MerkleProof,
    MerkleProofError,
    decode_merkle_proof,
    encode_merkle_proof,
)
from protocol.core.errors import VeritrainError
from protocol.core.proof.envelope_header import MAGIC, MAX_HEADER_BYTES, EnvelopeHeader
from protocol.core.proof.envelope_header import Address as Address
from protocol.core.proof.envelope_header import Hex32 as Hex32
from protocol.core.proof.trace import Trace


class EnvelopeError(VeritrainError):
    """Raised when submission bytes are malformed, oversized, or name another chain, round or miner."""


@dataclass(frozen=True)
class Envelope:
    header: EnvelopeHeader
    update: bytes

    @property
    def trace(self) -> Trace:
        h = self.header
        return Trace(tuple(Digest(bytes.fromhex(x)) for x in h.checkpoint_hashes), tuple(h.losses),
                     Digest(bytes.fromhex(h.carry_hash)))


def encode_envelope(chain_id: int, contract: str, round_: int, miner: str, trace: Trace, update: bytes) -> bytes:
    header = EnvelopeHeader(
        chain_id=chain_id, contract=contract, round=round_, miner=miner,
        checkpoint_hashes=[h.hex() for h in trace.checkpoint_hashes], losses=[float(x) for x in trace.losses],
        carry_hash=trace.carry_hash.hex(), update_size=len(update),
    )
    return frame(MAGIC, header.model_dump_json().encode(), update)


def frame(magic: bytes, header_json: bytes, update: bytes) -> bytes:
    """magic ‖ u32 header length ‖ header JSON ‖ update: the layout of every committed envelope."""
    return magic + struct.pack(">I", len(header_json)) + header_json + update


def unframe(data: bytes, magic: bytes, max_bytes: int, what: str) -> tuple[bytes, bytes]:
    """(header JSON, update) of untrusted `frame` bytes; EnvelopeError names `what` it was meant to be."""
    if len(data) > max_bytes:
        raise EnvelopeError(f"{what} of {len(data)} bytes exceeds the cap of {max_bytes}")
    if len(data) < len(magic) + 4 or data[: len(magic)] != magic:
        raise EnvelopeError(f"not a veritrain {what} (bad magic)")
    (n,) = struct.unpack(">I", data[len(magic) : len(magic) + 4])
    start = len(magic) + 4
    if n > MAX_HEADER_BYTES or start + n > len(data):
        raise EnvelopeError(f"{what} header length out of range")
    return data[start : start + n], data[start + n :]


def decode_envelope(data: bytes, max_bytes: int) -> Envelope:
    """Parse untrusted bytes; every failure is a EnvelopeError."""
    header_json, update = unframe(data, MAGIC, max_bytes, "submission")
    try:
        header = EnvelopeHeader.model_validate_json(header_json)
    except ValidationError as exc:
        raise EnvelopeError(f"submission header invalid: {exc.errors()[0]['msg']}") from exc
    if len(update) != header.update_size:
        raise EnvelopeError("submission update size does not match its header")
    return Envelope(header, update)


class BoundHeader(Protocol):
    """What binds an envelope to its commit: read-only (the headers are frozen models)."""

    @property
    def chain_id(self) -> int: ...
    @property
    def contract(self) -> str: ...
    @property
    def round(self) -> int: ...
    @property
    def miner(self) -> str: ...


def check_binding(env: Envelope, chain_id: int, contract: str, round_: int, miner: str) -> None:
    """The submission must name this chain, contract, round and committing miner."""
    check_header_binding(env.header, chain_id, contract, round_, miner, "submission")


def check_header_binding(h: BoundHeader, chain_id: int, contract: str, round_: int, miner: str, what: str) -> None:
    if h.chain_id != chain_id or h.contract.lower() != contract.lower():
        raise EnvelopeError(f"{what} names another chain or contract")
    if h.round != round_:
        raise EnvelopeError(f"{what} is for round {h.round}, not {round_}")
    if h.miner.lower() != miner.lower():
        raise EnvelopeError(f"{what} names miner {h.miner}, not the committer {miner}")


def encode_proof(index: int, size: int, siblings: list[bytes]) -> bytes:
    """A Merkle leaf proof as compact JSON (served next to each checkpoint)."""
    return encode_merkle_proof(MerkleProof(index, size, tuple(Digest(x) for x in siblings)))


def decode_proof(data: bytes) -> tuple[int, int, list[bytes]]:
    """Parse untrusted proof bytes; raises EnvelopeError."""
    try:
        p = decode_merkle_proof(data)
    except MerkleProofError as exc:
        raise EnvelopeError(str(exc)) from exc
    return p.index, p.size, list(p.siblings)
