"""A validator's revealed score vector (docs/PROTOCOL.md §11.1): packing, vector root, commitment.

Scores travel as calldata only; the Scores contract keeps just `vector_root`, so the packing
and the root must match what it recomputes byte for byte. The packed scores are hashed in
segments of 128 scores: a challenge of one column then carries, per validator, only the
segment holding that column and the other segments' hashes (about 600 bytes, not 2 KiB).
"""

from __future__ import annotations

from collections.abc import Sequence

from protocol.core.crypto.keccak import keccak256
from protocol.core.errors import ResultError
from protocol.core.settlement.abi_words import enc, list_hash, tag

SCORE_MAX = 2**16 - 1  # scores are uint16: 2 bytes per miner
SCORE_BYTES = 2
VECTOR_DOMAIN = tag("veritrain/vector/v1")
SEGMENT_SCORES = 128  # scores per hashed segment
SEGMENT_BYTES = SEGMENT_SCORES * SCORE_BYTES


def pack_scores(scores: Sequence[int]) -> bytes:
    """The calldata form of a vector: 2 bytes big-endian per miner, in column order."""
    for score in scores:
        if not 0 <= score <= SCORE_MAX:
            raise ResultError(f"score {score} is outside 0..{SCORE_MAX}")
    return b"".join(s.to_bytes(SCORE_BYTES, "big") for s in scores)


def unpack_scores(packed: bytes) -> tuple[int, ...]:
    """The scores of a revealed `scores` field (the inverse of `pack_scores`)."""
    if len(packed) % SCORE_BYTES:
        raise ResultError(f"a score vector has an even number of bytes, not {len(packed)}")
    return tuple(int.from_bytes(packed[k:k + SCORE_BYTES], "big") for k in range(0, len(packed), SCORE_BYTES))


def segments(packed: bytes) -> list[bytes]:
    """The packed vector cut into segments of SEGMENT_BYTES (the last may be shorter)."""
    return [packed[k:k + SEGMENT_BYTES] for k in range(0, len(packed), SEGMENT_BYTES)]


def segment_hashes(packed: bytes) -> list[bytes]:
    return [keccak256(seg) for seg in segments(packed)]


def scores_hash(scores: Sequence[int]) -> bytes:
    """list_hash of the segments' keccak hashes: what the vector root binds."""
    return list_hash(segment_hashes(pack_scores(scores)))


def vector_root(chain_id: int, scores_contract: str, validator: str, round: int, scores: Sequence[int],
                witness_root: bytes, heldout_loss: int) -> bytes:
    """What the Scores contract stores for a reveal: every revealed field, bound to chain, contract,
    validator and round so a vector cannot be replayed elsewhere."""
    return keccak256(enc(VECTOR_DOMAIN, chain_id, scores_contract, validator, round,
                         scores_hash(scores), witness_root, heldout_loss))


def score_commitment(root: bytes, salt: bytes) -> bytes:
    """The hiding commitment a validator posts before revealing `root`."""
    return keccak256(enc(root, salt))
