"""A stage's committed update (PROTOCOL.md §16.4) is a function of its start and end states alone:
the same states give the same bytes, another end state other bytes, and states that name their
parameters differently are refused rather than compared."""

from __future__ import annotations

import pytest
import torch

from protocol.core.pipeline.stage_update import stage_update
from protocol.core.train.compute_config import ComputeConfig

CFG = ComputeConfig()


def states(seed: int) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return {"blocks.0.w": torch.randn(64, 64, generator=gen), "blocks.0.b": torch.randn(64, generator=gen)}


def test_the_update_follows_from_the_two_states_alone():
    start, end = states(1), states(2)
    assert stage_update(start, end, CFG) == stage_update({k: v.clone() for k, v in start.items()}, end, CFG)
    nudged = {k: v + 1e-3 for k, v in end.items()}
    assert stage_update(start, nudged, CFG) != stage_update(start, end, CFG)
    with pytest.raises(ValueError, match="different parameters"):
        stage_update(start, dict(reversed(list(end.items()))), CFG)
