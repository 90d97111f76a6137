"""Typed reads of the Disputes contract: fraud reports, votes and bonds."""

from __future__ import annotations

from protocol.chain.lean_contract import LeanContract


class DisputesReader:
    def __init__(self, contract: LeanContract) -> None:
        self._fn = contract.functions

    def report_count(self) -> int:
        """Reports ever filed; their ids are 1..report_count."""
        return int(self._fn.report_count().call())

    def report_of(self, round_: int, miner: str, reporter: str) -> int:
        """The id of `reporter`'s report on `miner` in `round_`, 0 when it filed none."""
        return int(self._fn.report_of(round_, miner, reporter).call())

    def reports_filed(self, round_: int, reporter: str) -> int:
        """Reports `reporter` filed in `round_` (joins not counted): it may file `max_reports`."""
        return int(self._fn.reports_filed(round_, reporter).call())

    def max_reports(self) -> int:
        """Reports one validator may file per round."""
        return int(self._fn.max_reports().call())

    def vote_of(self, report_id: int, voter: str) -> int:
        """`voter`'s vote on a report (a `Vote` value), 0 when it has not voted."""
        return int(self._fn.vote_of(report_id, voter).call())

    def open_in_round(self, round_: int) -> int:
        """Reports of `round_` still open (its result waits until none is)."""
        return int(self._fn.open_in_round(round_).call())

    def total_bonds(self) -> int:
        """Report bonds the contract holds (base units)."""
        return int(self._fn.total_bonds().call())
