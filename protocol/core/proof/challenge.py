"""Challenges: seed = H(σ), σ = ed25519(validator, domain ‖ r ‖ miner ‖ B); the segments follow."""

from __future__ import annotations

from dataclasses import dataclass

from protocol.core.crypto.hashing import (
    Digest,
    blake3_hash,
    u64,
)
from protocol.core.crypto.signing import NodeIdentity, verify
from protocol.core.errors import VeritrainError
from protocol.core.train.compute_config import ComputeConfig
from protocol.core.train.data import sample_distinct

CHALLENGE_DOMAIN = b"veritrain/challenge/v1"


class ChallengeError(VeritrainError):
    """Raised when a challenge's seed or segments do not follow from its signature."""

# challenges: seed = H(σ), σ = ed25519(validator, domain ‖ r ‖ miner ‖ B)


@dataclass(frozen=True)
class Challenge:
    signature: bytes  # σ, carried in reports so voters can recheck it
    seed: Digest  # H(σ)
    segments: tuple[int, ...]  # sorted segment indices to replay


def challenge_message(round_: int, miner: bytes, blockhash: bytes) -> bytes:
    return CHALLENGE_DOMAIN + u64(round_) + miner + blockhash


def choose_segments(seed: bytes, n_segments: int, q: int) -> tuple[int, ...]:
    return tuple(sorted(sample_distinct(seed, range(n_segments), q, label=7)))


def make_challenge(identity: NodeIdentity, round_: int, miner: bytes, blockhash: bytes,
                   cfg: ComputeConfig) -> Challenge:
    sig = identity.sign(challenge_message(round_, miner, blockhash))
    seed = blake3_hash("challenge-seed", sig)
    return Challenge(sig, seed, choose_segments(seed, cfg.n_segments, cfg.segments_per_validator))


def verify_challenge(public_key: bytes, round_: int, miner: bytes, blockhash: bytes,
                     ch: Challenge, cfg: ComputeConfig) -> None:
    """Raise SignatureError/ChallengeError unless `ch` is the validator's honest challenge."""
    verify(public_key, challenge_message(round_, miner, blockhash), ch.signature)
    seed = blake3_hash("challenge-seed", ch.signature)
    if ch.seed != seed or ch.segments != choose_segments(seed, cfg.n_segments,
                                                          cfg.segments_per_validator):
        raise ChallengeError("challenge seed or segments do not follow from its signature")

