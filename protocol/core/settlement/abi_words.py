"""The few lines of ABI encoding settlement needs: static words, their concatenation, list hashes.

Everything the Results, Challenges and Rewards contracts recompute is built from 32-byte words
(`abi_encode` of static values), so these helpers replace eth_abi in the pure core.
"""

from __future__ import annotations

from collections.abc import Iterable

from protocol.core.crypto.keccak import address_bytes, keccak256
from protocol.core.errors import ResultError

Word = int | bytes | str  # uint256, bytes32, or a hex address

WORD_BYTES = 32
UINT256_LIMIT = 2**256
ZERO_WORD = bytes(WORD_BYTES)


def word(value: Word) -> bytes:
    """The 32-byte word of a uint256 (big-endian), a bytes32 (as is) or an address (left-padded)."""
    if isinstance(value, bool):
        value = int(value)
    if isinstance(value, int):
        if not 0 <= value < UINT256_LIMIT:
            raise ResultError(f"{value} does not fit a uint256")
        return value.to_bytes(WORD_BYTES, "big")
    if isinstance(value, bytes):
        if len(value) != WORD_BYTES:
            raise ResultError(f"a bytes32 word has 32 bytes, not {len(value)}")
        return value
    if isinstance(value, str):
        try:
            return address_bytes(value).rjust(WORD_BYTES, b"\x00")
        except ValueError as exc:  # eth_utils' answer to a malformed address
            raise ResultError(f"{value!r} is not an address") from exc
    raise ResultError(f"cannot encode {type(value).__name__} as a word")


def enc(*values: Word) -> bytes:
    """Vyper/Solidity `abi_encode` of static values: their words, concatenated."""
    return b"".join(word(v) for v in values)


def list_hash(values: Iterable[Word]) -> bytes:
    """Vyper `keccak256(abi_encode(xs))` for a DynArray[uint256|bytes32]: offset, length, items."""
    items = [word(v) for v in values]
    return keccak256(word(WORD_BYTES) + word(len(items)) + b"".join(items))


def tag(domain: str) -> bytes:
    """A domain separator: the hash of its name, so every hashed structure is typed."""
    return keccak256(domain.encode())
