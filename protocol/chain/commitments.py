"""Hashes the chain checks, computed off-chain the same way (keccak + ABI encoding)."""

from __future__ import annotations

from collections.abc import Sequence

from eth_abi import encode as abi_encode

from protocol.core.keccak import address_bytes
from protocol.core.keccak import keccak256 as keccak

SCORE_DOMAIN = keccak(b"veritrain/scores/v1")
MAX_SCORE = 65535


def score_commitment(chain_id: int, scores_contract: str, validator: str, round_: int,
                     miners: Sequence[str], scores: Sequence[int], salt: bytes) -> bytes:
    """keccak(abi_encode(domain, chain id, contract, validator, round, miners, scores, salt));
    `scores_contract` is the Scores contract's address (the one that checks the reveal)."""
    return keccak(abi_encode(
        ["bytes32", "uint256", "address", "address", "uint256", "address[]", "uint16[]", "bytes32"],
        [SCORE_DOMAIN, chain_id, scores_contract, validator, round_, list(miners), list(scores), salt],
    ))


def sort_miners(miners: Sequence[str]) -> list[str]:
    """Ascending by address value, as `reveal_scores` requires."""
    return sorted(miners, key=address_bytes)


def commit_slot(update_hash: bytes, trace_root: bytes) -> bytes:
    """The single storage slot `commit_update` writes."""
    return keccak(update_hash + trace_root)
