"""Pipelines of a round from the stage miners eligible at round open (issue 32): chain randomness
picks who trains, last round's verified steps pair them, never a speed a miner reports itself.

With S stages and n_s eligible miners of stage s, the round forms P = min_s n_s pipelines. Each
stage's P trainers are the first P of its miners ordered by keccak256(DOMAIN ‖ seed ‖ s ‖ address)
(the round's seed exists only after the snapshot of who is eligible, so nobody picks its place);
the others of a larger stage sit the round out. The P trainers of every stage are then ranked by
their verified steps of the last round, most first (keccak order on a tie, and a newcomer has 0),
and pipeline p takes the p-th of every stage: fast stages train with fast, slow with slow, so no
pipeline waits on a stranger's slow stage.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from protocol.core.crypto.keccak import keccak256
from protocol.core.errors import ConfigError

DOMAIN = b"veritrain/pipeline/v1"


@dataclass(frozen=True)
class StageMiner:
    address: str  # 0x-prefixed, 20 bytes
    verified_steps: int  # in the last round it trained (0: none)


def _draw(seed: bytes, stage: int, address: str) -> bytes:
    return keccak256(DOMAIN + seed + stage.to_bytes(32, "big") + bytes.fromhex(address[2:]))


def form_pipelines(seed: bytes, by_stage: Sequence[Sequence[StageMiner]]) -> list[tuple[str, ...]]:
    """Pipeline p's miners, stage 0 first; none when a stage has no eligible miner."""
    if len(by_stage) < 2:
        raise ConfigError("pipelines need at least two stages")
    for stage, miners in enumerate(by_stage):
        if len({m.address.lower() for m in miners}) != len(miners):
            raise ConfigError(f"stage {stage} lists a miner twice")
    count = min(len(miners) for miners in by_stage)
    ranked = [_rank(seed, stage, miners, count) for stage, miners in enumerate(by_stage)]
    return [tuple(ranked[s][p].address for s in range(len(by_stage))) for p in range(count)]


def _rank(seed: bytes, stage: int, miners: Sequence[StageMiner], count: int) -> list[StageMiner]:
    """The stage's `count` trainers, drawn by the seed, then by last round's verified steps."""
    order = {m.address: _draw(seed, stage, m.address) for m in miners}
    drawn = sorted(miners, key=lambda m: order[m.address])[:count]
    return sorted(drawn, key=lambda m: (-m.verified_steps, order[m.address]))
