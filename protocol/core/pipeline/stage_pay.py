"""How a pipeline's score is split among its stages (docs/PROTOCOL.md §16.9), torch-free.

A pipeline's combined update is scored as one miner's is (`staged_loss` over θ_r + every stage's
update); each stage miner's column then carries its share of that score, by verified work, and
the result function pays columns by consensus score as for every miner, so the split is audited
bit for bit like any score and needs no loop on chain. A stage's work is its verified steps times
its training FLOPs per token, 6 per parameter a token passes through (forward and backward; an
embedding row is a lookup, not a product, so embedding tables count nothing) plus the attention
products, 6 · T · C per block. If any stage of the pipeline failed its check, the pipeline's
update is dropped for the round: every stage's share is 0, and only the failed stage is slashed
(by its own report), so an honest stage-mate loses that round's pay and nothing else.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from protocol.core.errors import ConfigError
from protocol.core.model.config import ModelConfig, layout
from protocol.core.pipeline.stage_split import StageSplit

EMBEDDINGS = ("wte.weight", "wpe.weight", "tok_emb.weight")  # lookups: no product per token


def stage_flops_per_token(cfg: ModelConfig, split: StageSplit, stage: int) -> int:
    """Training FLOPs per token of stage `stage`: 6 per non-embedding parameter, 6·T·C per block."""
    shapes = layout(cfg)
    products = sum(math.prod(shapes[n]) for n in split.names[stage] if n not in EMBEDDINGS)
    return 6 * products + 6 * len(split.blocks[stage]) * cfg.block_size * cfg.n_embd


def stage_scores(pipeline_score: int, work: Sequence[int], passed: Sequence[bool]) -> tuple[int, ...]:
    """Each stage's share of its pipeline's score (integer, rounded down), by `work`; all 0 when
    any stage failed its check (the pipeline's update is dropped)."""
    if len(work) != len(passed) or not work or any(w <= 0 for w in work):
        raise ConfigError("one positive work figure and one check result per stage")
    if pipeline_score < 0:
        raise ConfigError(f"a score is not negative, not {pipeline_score}")
    if not all(passed):
        return (0,) * len(work)
    total = sum(work)
    return tuple(pipeline_score * w // total for w in work)


def present_stage_scores(pipeline_score: int, work: Sequence[int], committed: Sequence[bool]) -> tuple[int, ...]:
    """Each stage's share when some committed nothing (silent, killed): a committed stage keeps its
    own share by work over every stage; a silent stage's share is lost, not handed to the others."""
    shares = stage_scores(pipeline_score, work, [True] * len(work))
    if len(committed) != len(work):
        raise ConfigError("one commit flag per stage")
    return tuple(share if done else 0 for share, done in zip(shares, committed, strict=True))


def stage_work(cfg: ModelConfig, split: StageSplit, steps: Sequence[int]) -> tuple[int, ...]:
    """Each stage's verified work: its verified steps times its FLOPs per token (tokens per step
    are the pipeline's, the same for every stage)."""
    if len(steps) != split.count:
        raise ConfigError(f"{len(steps)} step counts for {split.count} stages")
    return tuple(s * stage_flops_per_token(cfg, split, i) for i, s in enumerate(steps))
