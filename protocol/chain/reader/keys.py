"""Typed reads of the BlsKeys contract: validators' BLS keys."""

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
