"""Domain-separated hashes for bulk data and binary Merkle trees with leaf proofs.

Bulk data (checkpoints, token pages, update blobs, traces) is hashed with blake3 (3-7 GB/s
here); sha256 is offered for interop. Keccak is *not* used here: only `protocol/chain`
hashes what the contract must recompute.

Every hash starts from a domain tag, and every part is length-prefixed, so no two
(domain, parts) tuples can collide by concatenation. The Merkle tree follows RFC 6962:
leaves and inner nodes use different prefixes, and an odd tree splits at the largest power
of two below its size (no duplicated last leaf, hence no CVE-2012-2459-style ambiguity).
"""

from __future__ import annotations

import hashlib
import json
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import NewType

import blake3

from protocol.core.errors import VeritrainError

Digest = NewType("Digest", bytes)  # 32-byte hash
DIGEST_SIZE = 32
_PREFIX = b"veritrain/v1/"
_LEAF = b"\x00"
_NODE = b"\x01"


class MerkleProofError(VeritrainError):
    """Raised when a Merkle proof is malformed or does not lead to the expected root."""


def _framed(domain: str, parts: Iterable[bytes | memoryview]) -> Iterable[bytes | memoryview]:
    tag = _PREFIX + domain.encode()
    yield struct.pack("<Q", len(tag))
    yield tag
    for part in parts:
        yield struct.pack("<Q", memoryview(part).nbytes)
        yield part


def blake3_hash(domain: str, *parts: bytes | memoryview) -> Digest:
    """blake3 over the length-framed domain tag and parts (the default bulk hash)."""
    h = blake3.blake3()
    for chunk in _framed(domain, parts):
        h.update(chunk)
    return Digest(h.digest())


def content_hash(data: bytes | memoryview) -> Digest:
    """The hash blobs are stored, requested and attested by: plain blake3 of the bytes, 32
    bytes, no domain tag (a foreign peer computes it with any blake3 library)."""
    return Digest(blake3.blake3(data).digest())


def content_hasher() -> blake3.blake3:
    """Incremental `content_hash`, for blobs that arrive or are written in chunks."""
    return blake3.blake3()


def sha256_hash(domain: str, *parts: bytes | memoryview) -> Digest:
    """sha256 over the same framing as `blake3_hash`, for consumers that need sha256."""
    h = hashlib.sha256()
    for chunk in _framed(domain, parts):
        h.update(chunk)
    return Digest(h.digest())


class StreamHasher:
    """Incremental `blake3_hash`: the framing of each `update` part is identical."""

    def __init__(self, domain: str) -> None:
        self._h = blake3.blake3()
        for chunk in _framed(domain, ()):
            self._h.update(chunk)

    def update(self, part: bytes | memoryview) -> None:
        self._h.update(struct.pack("<Q", memoryview(part).nbytes))
        self._h.update(part)

    def digest(self) -> Digest:
        return Digest(self._h.digest())


def u64(value: int) -> bytes:
    """Canonical 8-byte big-endian encoding of a non-negative integer (rounds, steps, indices)."""
    return value.to_bytes(8, "big")


def seed_int(seed: bytes, *labels: int) -> int:
    """A deterministic 256-bit integer from a seed and integer labels (version-stable PRNG)."""
    return int.from_bytes(blake3_hash("prng", seed, *(u64(x) for x in labels)), "big")


# ---------------------------------------------------------------------------------------
# Merkle trees (RFC 6962 shape, blake3 with leaf/node prefixes)


def leaf_hash(leaf: bytes) -> Digest:
    return blake3_hash("merkle", _LEAF, leaf)


def _node_hash(left: bytes, right: bytes) -> Digest:
    return blake3_hash("merkle", _NODE, left, right)


def _split(n: int) -> int:
    """Largest power of two strictly below n (n >= 2)."""
    k = 1
    while k * 2 < n:
        k *= 2
    return k


def _root_of_hashed(hashed: Sequence[bytes]) -> Digest:
    if len(hashed) == 1:
        return Digest(hashed[0])
    k = _split(len(hashed))
    return _node_hash(_root_of_hashed(hashed[:k]), _root_of_hashed(hashed[k:]))


def merkle_root(leaves: Sequence[bytes]) -> Digest:
    """Root over `leaves` (arbitrary bytes, usually digests). The empty tree is rejected."""
    if not leaves:
        raise MerkleProofError("a Merkle tree needs at least one leaf")
    return _root_of_hashed([leaf_hash(x) for x in leaves])


@dataclass(frozen=True)
class MerkleProof:
    """Audit path for leaf `index` in a tree of `size` leaves, bottom-up siblings."""

    index: int
    size: int
    siblings: tuple[Digest, ...]


def _path(hashed: Sequence[bytes], index: int) -> list[Digest]:
    if len(hashed) == 1:
        return []
    k = _split(len(hashed))
    if index < k:
        return [*_path(hashed[:k], index), _root_of_hashed(hashed[k:])]
    return [*_path(hashed[k:], index - k), _root_of_hashed(hashed[:k])]


def merkle_proof(leaves: Sequence[bytes], index: int) -> MerkleProof:
    """Proof that `leaves[index]` is in `merkle_root(leaves)`."""
    if not 0 <= index < len(leaves):
        raise MerkleProofError(f"leaf index {index} out of range for {len(leaves)} leaves")
    hashed = [leaf_hash(x) for x in leaves]
    return MerkleProof(index, len(leaves), tuple(_path(hashed, index)))


def _fold(node: Digest, index: int, size: int, siblings: list[Digest]) -> Digest:
    """Recompute the root from the bottom-up sibling list (consumed from the end)."""
    if size == 1:
        if siblings:
            raise MerkleProofError("Merkle proof has too many siblings")
        return node
    if not siblings:
        raise MerkleProofError("Merkle proof has too few siblings")
    k = _split(size)
    sibling = siblings.pop()  # the top-most sibling splits this subtree
    if index < k:
        return _node_hash(_fold(node, index, k, siblings), sibling)
    return _node_hash(sibling, _fold(node, index - k, size - k, siblings))


def merkle_root_from_proof(leaf: bytes, proof: MerkleProof) -> Digest:
    if not 0 <= proof.index < proof.size:
        raise MerkleProofError(f"leaf index {proof.index} out of range for size {proof.size}")
    return _fold(leaf_hash(leaf), proof.index, proof.size, list(proof.siblings))


def verify_merkle_proof(root: bytes, leaf: bytes, proof: MerkleProof) -> None:
    """Raise MerkleProofError unless `leaf` sits at `proof.index` under `root`."""
    if merkle_root_from_proof(leaf, proof) != root:
        raise MerkleProofError(f"leaf {proof.index} does not lead to the expected Merkle root")


MAX_PROOF_SIZE = 1 << 20  # leaves a decoded proof may claim
MAX_PROOF_SIBLINGS = 64


def encode_merkle_proof(proof: MerkleProof) -> bytes:
    """A leaf proof as compact JSON, as served next to each checkpoint (docs/INTEROP.md §6)."""
    return json.dumps({"index": proof.index, "size": proof.size,
                       "siblings": [s.hex() for s in proof.siblings]}).encode()


def decode_merkle_proof(data: bytes) -> MerkleProof:
    """Parse untrusted proof bytes; raise MerkleProofError if malformed or out of range."""
    try:
        obj = json.loads(data)
        index, size = int(obj["index"]), int(obj["size"])
        siblings = tuple(Digest(bytes.fromhex(s)) for s in obj["siblings"])
    except (ValueError, KeyError, TypeError) as exc:
        raise MerkleProofError("malformed Merkle proof") from exc
    if not 0 <= index < size <= MAX_PROOF_SIZE or len(siblings) > MAX_PROOF_SIBLINGS \
            or any(len(s) != DIGEST_SIZE for s in siblings):
        raise MerkleProofError("Merkle proof out of range")
    return MerkleProof(index, size, siblings)
