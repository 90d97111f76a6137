"""Equivocation evidence as one fixed-width blob, and a voter's check of it (docs/PROTOCOL.md
§16.6), torch-free.

A receiver that holds two signatures by its sender of different hashes for one slot (the stage
link keeps the second tensor's claim when it refuses it: `StageInbox.equivocations`) has evidence
against the sender alone. The blob is

    slot key (161: round, pipeline, stage, step, microbatch, 32 bytes each, direction 1)
    ‖ lower hash (32) ‖ its signature (64) ‖ higher hash (32) ‖ its signature (64)

the two claims in hash order, so one pair has one blob and one content hash, whoever files it.
No contract checks an ed25519 signature, so the chain can only hold the blob's content hash: a
voter fetches the blob by that hash and confirms only if it is the accused's equivocation in the
reported round (`judge_evidence`).
"""

from __future__ import annotations

from protocol.core.crypto.hashing import Digest, content_hash
from protocol.core.errors import VeritrainError
from protocol.core.pipeline.attribution import Domain
from protocol.core.pipeline.boundary import (
    Direction,
    NotEquivocation,
    Signed,
    Slot,
    check_equivocation,
)

SLOT_BYTES = 5 * 32 + 1
CLAIM_BYTES = 32 + 64
EVIDENCE_BYTES = SLOT_BYTES + 2 * CLAIM_BYTES  # 353


class EvidenceMalformed(VeritrainError):
    """Raised when an equivocation blob is not one slot and two claims in hash order."""


def encode_evidence(slot: Slot, a: Signed, b: Signed) -> bytes:
    """The evidence blob of two claims for `slot` (in either order)."""
    low, high = sorted((a, b), key=lambda c: c.tensor_hash)
    for claim in (low, high):
        if len(claim.tensor_hash) != 32 or len(claim.signature) != 64:
            raise EvidenceMalformed("a claim is a 32-byte hash and a 64-byte signature")
    return slot.key() + low.tensor_hash + low.signature + high.tensor_hash + high.signature


def decode_evidence(blob: bytes) -> tuple[Slot, Signed, Signed]:
    """The slot and the two claims of an evidence blob (EvidenceMalformed on any other form)."""
    if len(blob) != EVIDENCE_BYTES:
        raise EvidenceMalformed(f"equivocation evidence is {EVIDENCE_BYTES} bytes, not {len(blob)}")
    round_, pipeline, stage, step, microbatch = (int.from_bytes(blob[i * 32:(i + 1) * 32], "big") for i in range(5))
    if blob[160] not in (Direction.FORWARD, Direction.BACKWARD) or step < 1:
        raise EvidenceMalformed("equivocation evidence names no valid slot")
    slot = Slot(round_, pipeline, stage, step, microbatch, Direction(blob[160]))
    claims = [blob[SLOT_BYTES + i * CLAIM_BYTES: SLOT_BYTES + (i + 1) * CLAIM_BYTES] for i in range(2)]
    low, high = (Signed(c[:32], c[32:]) for c in claims)
    if not low.tensor_hash < high.tensor_hash:
        raise EvidenceMalformed("the two claims are not two hashes in order")
    return slot, low, high


def evidence_hash(blob: bytes) -> Digest:
    """What a report records on chain: the blob's content hash, by which voters fetch it."""
    return content_hash(blob)


def judge_evidence(blob: bytes, recorded: bytes, accused_key: bytes, domain: Domain, report_round: int) -> tuple[bool, str]:
    """A voter's verdict: (confirm, why). Confirm only the blob whose hash the report recorded,
    naming a slot of the reported round, whose two claims are the accused's signatures of two
    different hashes for that slot."""
    if evidence_hash(blob) != recorded:
        return False, "the served evidence is not the reported one"
    try:
        slot, a, b = decode_evidence(blob)
        if slot.round != report_round:
            return False, f"the evidence is of round {slot.round}, not {report_round}"
        check_equivocation(accused_key, domain.chain_id, domain.contract, slot, a, b)
    except (EvidenceMalformed, NotEquivocation) as exc:
        return False, str(exc)
    return True, f"two signed tensors for {slot}"
