"""Typed reads of the Rewards contract (emission, claims, forfeits) and of the Token."""

from __future__ import annotations

from protocol.chain.lean_contract import LeanContract


class RewardsReader:
    def __init__(self, contract: LeanContract) -> None:
        self._fn = contract.functions

    def emission_per_round(self) -> int:
        return int(self._fn.emission_per_round().call())

    def miner_share_bps(self) -> int:
        """The miners' share of each round's emission, in basis points."""
        return int(self._fn.miner_share_bps().call())

    def claims_root(self, round_: int) -> bytes:
        """The Merkle root of cumulative earnings as of `round_` (32 zero bytes: not paid)."""
        return bytes(self._fn.claims_root(round_).call())

    def claimed(self, account: str) -> int:
        """Tokens `account` has claimed in all (claims are cumulative)."""
        return int(self._fn.claimed(account).call())

    def open_reports(self, round_: int, account: str) -> int:
        """Reports of `round_` still open against `account` (its pay waits on them)."""
        return int(self._fn.open_reports(round_, account).call())

    def total_minted(self) -> int:
        return int(self._fn.total_minted().call())

    def total_claimed(self) -> int:
        return int(self._fn.total_claimed().call())


class TokenReader:
    def __init__(self, contract: LeanContract) -> None:
        self._fn = contract.functions

    def total_supply(self) -> int:
        return int(self._fn.totalSupply().call())
