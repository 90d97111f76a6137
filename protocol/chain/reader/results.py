"""Typed reads of the Results contract (certified results, their challenge window) and of the
result-challenge contracts (their bond)."""

from __future__ import annotations

from protocol.chain.lean_contract import LeanContract

ZERO_HASH = bytes(32)


class ResultsReader:
    def __init__(self, contract: LeanContract) -> None:
        self._fn = contract.functions

    def result_deadline(self, round_: int) -> int:
        """Until when a result of `round_` may be posted (0 before its commit phase closed)."""
        return int(self._fn.result_deadline(round_).call())

    def has_pending(self, round_: int) -> bool:
        """Whether a posted result of `round_` waits out its challenge window."""
        return bytes(self._fn.pending(round_).call()) != ZERO_HASH

    def final_root(self, round_: int) -> bytes:
        """The result root that became final for `round_` (32 zero bytes while none is)."""
        return bytes(self._fn.final_root(round_).call())

    def rejected_count(self, round_: int) -> int:
        """How many posted results of `round_` a challenge rejected (attempts 1..n)."""
        return int(self._fn.rejected_count(round_).call())

    def challenge_window(self) -> int:
        """Seconds a posted result stays open to challenges before it may be made final."""
        return int(self._fn.challenge_window().call())


class ChallengesReader:
    def __init__(self, contract: LeanContract) -> None:
        self._fn = contract.functions

    def challenge_bond(self) -> int:
        """Tokens (base units) a result challenge bonds."""
        return int(self._fn.challenge_bond().call())


class ColumnChallengesReader(ChallengesReader):
    def committee_size(self) -> int:
        """Seats of each miner's check committee the column challenges recompute (0: none)."""
        return int(self._fn.committee_size().call())
