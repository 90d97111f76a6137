"""Per-stage aggregation (docs/PROTOCOL.md §16.8): each stage's next slice from the verified
updates of that stage's miners, by the run's rule (`state.aggregate`, device-independent as for
a whole model); `staged_bundle.encode_parts` gives the next model hash over the new slices.

A stage miner's update is its stage's pseudo-gradient alone, compressed over the stage's flat
values (chunks of `chunk` from the stage's first value). A pipeline whose update was dropped (a
stage failed its check, `stage_pay.stage_scores`) contributes to no stage. Nothing couples the
stages' sums: with exact-sum-v1 and no norm clip, staged aggregation gives the bits the whole
model's would give to the concatenated updates when every stage boundary falls on a chunk boundary
(tests/core/test_staged_aggregate.py); in general each stage clips by its own update's norm.
"""

from __future__ import annotations

from collections.abc import Sequence

from protocol.core.aggregation.state import GlobalState, aggregate
from protocol.core.errors import ConfigError
from protocol.core.model.gpt import ModelConfig
from protocol.core.train.compute_config import ComputeConfig


def staged_next(parts: Sequence[GlobalState], updates: Sequence[Sequence[bytes]], steps: Sequence[Sequence[int]],
                model: ModelConfig, cfg: ComputeConfig) -> list[GlobalState]:
    """Each stage's next slice: `parts[s]` with `updates[s]` (the kept pipelines' stage-s update
    blobs, any order) weighted by `steps[s]` (their verified steps)."""
    if not len(parts) == len(updates) == len(steps):
        raise ConfigError(f"{len(parts)} stage slices, {len(updates)} update lists, {len(steps)} step lists")
    return [aggregate(part, blobs, model, cfg, list(st)) for part, blobs, st in zip(parts, updates, steps, strict=True)]
