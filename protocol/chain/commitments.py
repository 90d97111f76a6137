"""Hashes the chain checks, computed off-chain the same way (keccak + ABI encoding)."""

from __future__ import annotations

from collections.abc import Sequence

from eth_abi import encode as abi_encode

from protocol.core.keccak import address_bytes
from protocol.core.keccak import keccak256 as keccak

SCORE_DOMAIN = keccak(b"veritrain/scores/v1")
MAX_SCORE = 65535
SIG_BYTES = 64  # one ed25519 challenge signature per miner
NO_WITNESS = b"\0" * 32  # "no check passed for this miner" (its score should be 0)


def pack_sigs(sigs: Sequence[bytes]) -> bytes:
    """The reveal's `challenge_sigs` argument: the 64-byte signatures concatenated, in miners order."""
    for sig in sigs:
        if len(sig) != SIG_BYTES:
            raise ValueError(f"a challenge signature is {SIG_BYTES} bytes, got {len(sig)}")
    return b"".join(bytes(s) for s in sigs)


def unpack_sigs(packed: bytes) -> list[bytes]:
    """The inverse of `pack_sigs` (what a `ScoresRevealed` event carries)."""
    if len(packed) % SIG_BYTES:
        raise ValueError(f"packed challenge signatures are a multiple of {SIG_BYTES} bytes, got {len(packed)}")
    return [bytes(packed[i:i + SIG_BYTES]) for i in range(0, len(packed), SIG_BYTES)]


def score_commitment(chain_id: int, scores_contract: str, validator: str, round_: int,
                     miners: Sequence[str], scores: Sequence[int], witnesses: Sequence[bytes],
                     sigs: Sequence[bytes], salt: bytes) -> bytes:
    """keccak(abi_encode(domain, chain id, contract, validator, round, miners, scores, witnesses,
    challenge_sigs, salt)); `scores_contract` is the Scores contract's address (the one that checks
    the reveal); `witnesses` are 32 bytes each and `sigs` 64 bytes each, one per miner (the
    contract takes the signatures concatenated, as `bytes`)."""
    return keccak(abi_encode(
        ["bytes32", "uint256", "address", "address", "uint256", "address[]", "uint16[]", "bytes32[]", "bytes",
         "bytes32"],
        [SCORE_DOMAIN, chain_id, scores_contract, validator, round_, list(miners), list(scores),
         [bytes(w) for w in witnesses], pack_sigs(sigs), salt],
    ))


def sort_miners(miners: Sequence[str]) -> list[str]:
    """Ascending by address value, as `reveal_scores` requires."""
    return sorted(miners, key=address_bytes)


def commit_slot(update_hash: bytes, trace_root: bytes) -> bytes:
    """The single storage slot `commit_update` writes."""
    return keccak(update_hash + trace_root)
