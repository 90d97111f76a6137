"""A validator's revealed score vector (docs/PROTOCOL.md §11.1): packing, vector root, commitment.

Scores travel as calldata only; the Scores contract keeps just `vector_root`, so the packing
and the root must match what it recomputes byte for byte (`contracts/score_entries.vy`). A
vector is sparse: a 4-byte entry (column, score) for each miner scored nonzero; with committees
a validator scores only its seats, so a reveal grows with its work (about 2c n / v entries), not
with the network. It travels as one segment per 1,024 columns, each hashed on its own: a
challenge of one column carries, per validator, only the segment holding that column and the
other segments' hashes. The chain checks nothing inside a segment (a loop over the entries
would cost every reveal more than its calldata): column i's score is that of the first whole
entry naming i in segment i // 1024, 0 when none does, for any bytes a validator revealed.
"""

from __future__ import annotations

from collections.abc import Sequence

from protocol.core.crypto.keccak import keccak256
from protocol.core.errors import ResultError
from protocol.core.settlement.abi_words import enc, list_hash, tag

SCORE_MAX = 2**16 - 1  # scores and columns are uint16
ENTRY_BYTES = 4  # column, then score
VECTOR_DOMAIN = tag("veritrain/vector/v1")
SEGMENT_COLUMNS = 1024  # columns per segment
SEGMENT_BYTES = SEGMENT_COLUMNS * ENTRY_BYTES  # the most a segment holds


def segment_count(columns: int) -> int:
    return -(-columns // SEGMENT_COLUMNS)


def pack_segments(scores: Sequence[int]) -> list[bytes]:
    """The calldata form of a dense vector (one score per column): per 1,024 columns, an entry for
    each nonzero score, ascending."""
    if len(scores) > SCORE_MAX + 1:
        raise ResultError(f"{len(scores)} columns do not fit a uint16 column number")
    out = [bytearray() for _ in range(segment_count(len(scores)))]
    for column, score in enumerate(scores):
        if not 0 <= score <= SCORE_MAX:
            raise ResultError(f"score {score} is outside 0..{SCORE_MAX}")
        if score:
            out[column // SEGMENT_COLUMNS] += column.to_bytes(2, "big") + score.to_bytes(2, "big")
    return [bytes(seg) for seg in out]


def named_scores(segment: bytes) -> dict[int, int]:
    """Each column a segment names, with the score of the first whole entry naming it."""
    named: dict[int, int] = {}
    for e in range(0, len(segment) - len(segment) % ENTRY_BYTES, ENTRY_BYTES):
        named.setdefault(int.from_bytes(segment[e:e + 2], "big"), int.from_bytes(segment[e + 2:e + 4], "big"))
    return named


def unpack_segments(segments: Sequence[bytes], columns: int) -> tuple[int, ...]:
    """The dense vector (one score per column) of revealed segments over `columns` miners."""
    if len(segments) != segment_count(columns):
        raise ResultError(f"{len(segments)} score segments for {columns} columns, not {segment_count(columns)}")
    dense = [0] * columns
    for k, segment in enumerate(segments):
        named = named_scores(segment)
        for c in range(k * SEGMENT_COLUMNS, min(columns, (k + 1) * SEGMENT_COLUMNS)):
            dense[c] = named.get(c, 0)  # entries naming a column of another segment count for nothing
    return tuple(dense)


def segments_hash(segments: Sequence[bytes]) -> bytes:
    """list_hash of the segments' keccak hashes: what the vector root binds."""
    return list_hash([keccak256(seg) for seg in segments])


def scores_hash(scores: Sequence[int]) -> bytes:
    """The segments hash of a dense vector's packing (`pack_segments`)."""
    return segments_hash(pack_segments(scores))


def vector_root(chain_id: int, scores_contract: str, validator: str, round: int, scores: Sequence[int],
                witness_root: bytes, heldout_loss: int) -> bytes:
    """What the Scores contract stores for a reveal of `pack_segments(scores)`: every revealed field,
    bound to chain, contract, validator and round so a vector cannot be replayed elsewhere."""
    return segments_root(chain_id, scores_contract, validator, round, pack_segments(scores), witness_root, heldout_loss)


def segments_root(chain_id: int, scores_contract: str, validator: str, round: int, segments: Sequence[bytes],
                  witness_root: bytes, heldout_loss: int) -> bytes:
    """The vector root of segments as revealed, whatever their bytes."""
    return keccak256(enc(VECTOR_DOMAIN, chain_id, scores_contract, validator, round,
                         segments_hash(segments), witness_root, heldout_loss))


def score_commitment(root: bytes, salt: bytes) -> bytes:
    """The hiding commitment a validator posts before revealing `root`."""
    return keccak256(enc(root, salt))
