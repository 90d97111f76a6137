"""Cumulative reward claims (docs/PROTOCOL.md §11.6): OpenZeppelin-compatible sorted-pair Merkle tree.

Rewards verifies with snekmate's `merkle_proof_verification`, so leaves are double-hashed (no
leaf can pass for an inner node) and pairs are sorted (a proof needs no left/right bits).

The claims list is committed in chunks of CLAIMS_CHUNK leaves, so a challenge or a demand
answer carries one chunk, not the list: a chunk starts at a multiple of a power of two, so its
tree is a node of the whole tree (pairing never crosses it, and an odd last node is promoted
within the last chunk as within the list), and the claims root is the tree of the chunk roots.
"""

from __future__ import annotations

from collections.abc import Sequence

from protocol.core.crypto.keccak import keccak256
from protocol.core.errors import ResultError
from protocol.core.settlement.abi_words import ZERO_WORD, enc, list_hash


def claim_leaf(account: str, amount: int) -> bytes:
    """The leaf saying `account` has earned `amount` in total so far."""
    return keccak256(keccak256(enc(account, amount)))


def hash_pair(a: bytes, b: bytes) -> bytes:
    """keccak of the pair, smaller (as uint256) first: OZ `_hashPair`, snekmate `_hash_pair`."""
    return keccak256(a + b if a < b else b + a)  # big-endian bytes32 compare like uint256


def _next_level(level: Sequence[bytes]) -> list[bytes]:
    pairs = [hash_pair(level[k], level[k + 1]) for k in range(0, len(level) - 1, 2)]
    return pairs + ([level[-1]] if len(level) % 2 else [])  # an odd last node is promoted


def claims_root(leaves: Sequence[bytes]) -> bytes:
    """The root Rewards checks claims against; one leaf is its own root, none gives zero."""
    if not leaves:
        return ZERO_WORD
    level = list(leaves)
    while len(level) > 1:
        level = _next_level(level)
    return level[0]


def claim_proof(leaves: Sequence[bytes], k: int) -> list[bytes]:
    """The siblings of leaf `k`'s node at each level where it has one (none where it is promoted)."""
    if not 0 <= k < len(leaves):
        raise ResultError(f"no claim leaf {k} among {len(leaves)}")
    proof = []
    level = list(leaves)
    while len(level) > 1:
        sibling = k ^ 1
        if sibling < len(level):
            proof.append(level[sibling])
        level = _next_level(level)
        k >>= 1
    return proof


def verify_claim(proof: Sequence[bytes], root: bytes, leaf: bytes) -> bool:
    """OZ/snekmate `processProof(proof, leaf) == root`."""
    computed = leaf
    for sibling in proof:
        computed = hash_pair(computed, sibling)
    return computed == root


CLAIMS_CHUNK = 512  # claims per chunk (contracts/result_math.vy): a power of two; 16 KB of calldata


def claim_chunks(leaves: Sequence[bytes]) -> list[list[bytes]]:
    """The list cut into chunks of CLAIMS_CHUNK (the last one shorter); none when empty."""
    return [list(leaves[k:k + CLAIMS_CHUNK]) for k in range(0, len(leaves), CLAIMS_CHUNK)]


def chunk_count(claims: int) -> int:
    """How many chunks a list of `claims` leaves has."""
    return -(-claims // CLAIMS_CHUNK)


def chunk_summaries(leaves: Sequence[bytes]) -> list[bytes]:
    """Per chunk, its list hash and its tree's root, flat: what claims_list_hash hashes and what
    the claims-root challenge and the claims demand's answer carry."""
    return [word for chunk in claim_chunks(leaves) for word in (list_hash(chunk), claims_root(chunk))]


def claims_list_hash(leaves: Sequence[bytes]) -> bytes:
    """Commits to the leaf order chunk by chunk, so a challenge can dispute one leaf by its index
    with its chunk alone."""
    return list_hash(chunk_summaries(leaves))
