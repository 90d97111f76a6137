"""Another validator's challenge, rebuilt from its σ and checked against its registered key."""

from __future__ import annotations

from protocol.core.proof.challenge import (
    Challenge,
    ChallengeError,
    challenge_from_signature,
    verify_challenge,
)
from protocol.core.train.compute_config import ComputeConfig
from protocol.node.context import NodeContext


def verified_challenge(ctx: NodeContext, validator: str, r: int, miner: str, seed_block: bytes,
                       sig: bytes, cfg: ComputeConfig | None = None) -> Challenge:
    """The challenge `validator` drew for `miner` in round r, whose trace has `cfg`'s segments
    (the miner's committed steps; default the run's H). Raises ChallengeError when it has
    no registered node key, SignatureError when σ is not its signature of this challenge."""
    key = ctx.node_key_of(validator)
    if key is None:
        raise ChallengeError(f"{validator} has no registered node key")
    cfg = cfg if cfg is not None else ctx.setup.compute
    ch = challenge_from_signature(bytes(sig), cfg)
    verify_challenge(key, r, bytes.fromhex(miner[2:]), seed_block, ch, cfg)
    return ch
