"""Typed reads of the BlsKeys contract: validators' BLS keys and the aggregates that hold them."""

from __future__ import annotations

from protocol.chain.lean_contract import LeanContract

ZERO_HASH = bytes(32)


class KeysReader:
    def __init__(self, contract: LeanContract) -> None:
        self._fn = contract.functions

    def bls_key(self, account: str) -> bytes:
        """`account`'s registered BLS public key (EIP-2537 G1), b"" when it registered none."""
        return bytes(self._fn.key_of(account).call())

    def has_bls_key(self, account: str) -> bool:
        return bytes(self._fn.key_hash(account).call()) != ZERO_HASH

    def aggregate_holds(self, set_hash: bytes, account: str) -> bool:
        """Whether the cached aggregate key of validator set `set_hash` holds `account`'s key
        (it registered its key before the set was summed)."""
        return bytes(self._fn.member_key_hash(set_hash, account).call()) != ZERO_HASH
