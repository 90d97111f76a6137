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


def challenge_seed(sig: bytes) -> Digest:
    """seed = H(σ): the one place a challenge's seed is derived from its signature."""
    return blake3_hash("challenge-seed", sig)


def challenge_from_signature(sig: bytes, cfg: ComputeConfig) -> Challenge:
    """The challenge σ stands for: its seed and the segments of a trace with `cfg`'s segments.
    Whether σ is the validator's signature is `verify_challenge`'s to check."""
    seed = challenge_seed(sig)
    return Challenge(sig, seed, choose_segments(seed, cfg.n_segments, cfg.segments_per_validator))


def make_challenge(identity: NodeIdentity, round_: int, miner: bytes, blockhash: bytes,
                   cfg: ComputeConfig) -> Challenge:
    return challenge_from_signature(identity.sign(challenge_message(round_, miner, blockhash)), cfg)


def verify_challenge(public_key: bytes, round_: int, miner: bytes, blockhash: bytes,
                     ch: Challenge, cfg: ComputeConfig) -> None:
    """Raise SignatureError/ChallengeError unless `ch` is the validator's honest challenge."""
    verify(public_key, challenge_message(round_, miner, blockhash), ch.signature)
    if ch != challenge_from_signature(ch.signature, cfg):
        raise ChallengeError("challenge seed or segments do not follow from its signature")

