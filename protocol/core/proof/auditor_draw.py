"""Which other validators an auditor audits in a round (docs/PROTOCOL.md §15): a fixed expected
number of drawn auditors per validator, so an auditor's work stays flat as validators grow.

Auditor j audits validator v with chance min(1, A · w_j / W_v), W_v the round's weight but v's,
A = `chain.auditors`: about A auditors per validator, by stake, so splitting stake across
accounts draws no more audits. The draw is seeded by the auditor's σ_a (`make_audit_seed`), which
the audited validator cannot compute when it reveals (it lacks the auditor's key): it cannot
know who will audit it, so no lie is safe. A = 0 keeps every validator auditing every other.
"""

from __future__ import annotations

from protocol.core.crypto.hashing import blake3_hash

SCALE = 2**256


def audits(auditor_seed: bytes, validator: str, own_weight: int, others_weight: int, auditors: int) -> bool:
    """Whether the auditor with σ_a `auditor_seed` and weight `own_weight` audits `validator`,
    among validators weighing `others_weight` but `validator`."""
    if auditors == 0:
        return True
    if own_weight <= 0 or others_weight <= 0:
        return False
    point = int.from_bytes(bytes(blake3_hash("auditor-draw", auditor_seed, validator.lower().encode())), "big")
    return point * others_weight < auditors * own_weight * SCALE


def expected_auditors(weights: list[int], audited: int, auditors: int) -> float:
    """The expected number of auditors of validator `audited` (an index into `weights`)."""
    others = sum(weights) - weights[audited]
    if auditors == 0:
        return float(sum(1 for j, w in enumerate(weights) if j != audited and w > 0))
    return sum(min(1.0, auditors * w / others) for j, w in enumerate(weights) if j != audited and others > 0)
