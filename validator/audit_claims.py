"""What an auditor audits and what it finds (validator/audits.py, validator/score_audits.py)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Claim:
    """What validator `validator` revealed about `miner` in round `round`."""

    round: int
    validator: str
    miner: str
    index: int  # the miner's position in the round's miner list
    score: int
    witness: bytes
    sig: bytes
    served: bool = True  # False: its witness bundle was not served yet, so witness and sig are blanks


@dataclass(frozen=True)
class AuditResult:
    failed: bool
    detail: str
    retry: bool = False  # unserved: worth asking again before the deadline
