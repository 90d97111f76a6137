"""Typed reads of the Staking contract: registrations, stakes, eligibility, hardware classes."""

from __future__ import annotations

from protocol.chain.lean_contract import LeanContract


class StakingReader:
    def __init__(self, contract: LeanContract) -> None:
        self._fn = contract.functions

    # ---- registration -----------------------------------------------------------------
    def role(self, account: str) -> int:
        """The role `account` registered (a `Role` value), 0 when it never registered."""
        return int(self._fn.role(account).call())

    def node_key(self, account: str) -> bytes:
        """The ed25519 node key `account` registered (32 zero bytes when none)."""
        return bytes(self._fn.node_key(account).call())

    def multiaddr(self, account: str) -> str:
        """The libp2p address `account` registered for peers to dial ("" when none)."""
        return str(self._fn.multiaddr(account).call())

    def hardware_classes(self, account: str) -> int:
        """The class set `account` registered (bit i: the run's permitted class i; 0: none)."""
        return int(self._fn.hardware_classes(account).call())

    def classes_fixed(self, account: str) -> bool:
        """Whether `account`'s class set is fixed (it is from its first stake on)."""
        return bool(self._fn.classes_fixed(account).call())

    # ---- stake ----------------------------------------------------------------------
    def stake_of(self, account: str) -> int:
        """Tokens (base units) `account` has staked, not counting what it is unbonding."""
        return int(self._fn.staked(account).call())

    def unbonding_of(self, account: str) -> int:
        """Tokens `account` queued for withdrawal (still slashable until released)."""
        return int(self._fn.unbonding(account).call())

    def unbond_release_time(self, account: str) -> int:
        """When `account`'s unbonding tokens may be withdrawn (a timestamp)."""
        return int(self._fn.unbond_release_time(account).call())

    def eligible_role(self, account: str) -> int:
        """The role `account` is eligible for now (registered and staked at least its minimum;
        a validator also in the validator set), 0 when none."""
        return int(self._fn.eligible_role(account).call())

    def max_permits(self) -> int:
        """K: how many validators the permitted set holds at most."""
        return int(self._fn.max_permits().call())

    def permitted_validators(self) -> list[str]:
        """The permitted validators, by slot (the next round opens on them)."""
        return [str(self._fn.validators(i).call()) for i in range(int(self._fn.validator_count().call()))]

    def open_reports_against(self, account: str) -> int:
        """Fraud reports open against `account` (it cannot withdraw while any is)."""
        return int(self._fn.open_reports(account).call())

    def min_class_stake(self) -> int:
        """The validator stake that makes a hardware class checked exactly (base units)."""
        return int(self._fn.min_class_stake().call())

    # ---- totals ---------------------------------------------------------------------
    def eligible_miner_count(self) -> int:
        return int(self._fn.eligible_miner_count().call())

    def total_staked(self) -> int:
        return int(self._fn.total_staked().call())

    def total_unbonding(self) -> int:
        return int(self._fn.total_unbonding().call())

    def total_slashed(self) -> int:
        return int(self._fn.total_slashed().call())
