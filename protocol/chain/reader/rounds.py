"""Typed reads of the Rounds contract (round clock, commits, validator snapshots, model hashes)
and of the Scores contract (each validator's score commit, reveal and audit)."""

from __future__ import annotations

from protocol.chain.lean_contract import LeanContract

ZERO_HASH = bytes(32)
MEMBER_KEY_SHIFT = 112  # contracts/constants.vy: a member record's key hash bits


class RoundsReader:
    def __init__(self, contract: LeanContract) -> None:
        self._fn = contract.functions

    def model_hash(self, round_: int) -> bytes:
        """The hash of the model round `round_` trains from (set when round `round_ - 1`
        ended; 32 zero bytes before)."""
        return bytes(self._fn.model_hash(round_).call())

    def finalized(self, round_: int) -> bool:
        """Whether `round_` has ended (its result final, or it fell back)."""
        return bool(self._fn.finalized(round_).call())

    def audit_closed(self, round_: int) -> bool:
        return bool(self._fn.audit_closed(round_).call())

    def has_committed(self, round_: int, miner: str) -> bool:
        return bool(self._fn.has_committed(round_, miner).call())

    def commit_steps(self, round_: int, miner: str) -> int:
        """The inner steps `miner` committed in `round_` (0: the run's maximum H)."""
        return int(self._fn.commit_steps(round_, miner).call())

    def validator_weight(self, round_: int, validator: str) -> int:
        """`validator`'s stake weight in `round_`'s validator snapshot (0: not in it)."""
        return int(self._fn.validator_weight(round_, validator).call())

    def weights_of(self, round_: int, accounts: list[str]) -> list[int]:
        """Each account's weight in `round_`'s validator snapshot, in the given order."""
        return [int(w) for w in self._fn.weights_of(round_, accounts).call()]

    def aggregate_holds(self, round_: int, validator: str) -> bool:
        """Whether `round_`'s aggregate key holds `validator`'s key: it held a permit when the
        round opened and had registered its key by then (the key bits of its member record)."""
        return int(self._fn.member_record(round_, validator).call()) >> MEMBER_KEY_SHIFT != 0


class ScoresReader:
    def __init__(self, contract: LeanContract) -> None:
        self._fn = contract.functions

    def scores_committed(self, round_: int, validator: str) -> bool:
        return bytes(self._fn.score_commitment(round_, validator).call()) != ZERO_HASH

    def revealed(self, round_: int, validator: str) -> bool:
        return bool(self._fn.revealed(round_, validator).call())

    def audited(self, round_: int, validator: str) -> bool:
        """Whether `validator` said it finished its witness audits of `round_`."""
        return bool(self._fn.audited(round_, validator).call())
