"""Scoring a staged model one stage at a time (PROTOCOL.md §16.5): the same loss bits as the whole
model's forward pass, within the memory a stage miner of the largest stage needs."""

from __future__ import annotations

import pytest
import torch

from protocol.core.aggregation.heldout import attested_loss
from protocol.core.model.config import preset
from protocol.core.model.gpt import init_params
from protocol.core.pipeline.stage_memory import stage_memory
from protocol.core.pipeline.stage_module import stage_params
from protocol.core.pipeline.stage_split import split_model
from protocol.core.pipeline.staged_loss import scoring_memory, staged_loss


@pytest.mark.parametrize("name", ["micro", "llama-micro"])
def test_the_staged_loss_is_the_whole_models_bit_for_bit(name):
    cfg = preset(name)
    split, params = split_model(cfg, 2), init_params(cfg, 5)
    gen = torch.Generator().manual_seed(2)
    batches = [(torch.randint(0, cfg.vocab_size, (4, cfg.block_size), generator=gen),
                torch.randint(0, cfg.vocab_size, (4, cfg.block_size), generator=gen)) for _ in range(3)]
    x, y = torch.cat([b[0] for b in batches]), torch.cat([b[1] for b in batches])
    loaded = []
    loss = staged_loss(cfg, split, lambda s: loaded.append(s) or stage_params(params, split, s), x, y)
    assert loss == attested_loss(cfg, params, batches) and loaded == [0, 1]
    other = dict(params)
    other[split.names[1][0]] = other[split.names[1][0]] + 1e-3  # a change in the last stage moves it
    assert staged_loss(cfg, split, lambda s: stage_params(other, split, s), x, y) != loss


@pytest.mark.parametrize("name, stages", [("llama-small", 2), ("llama-small", 3), ("small", 2), ("tiny", 2)])
def test_a_validator_scoring_a_batch_needs_less_than_the_largest_stage_miner(name, stages):
    cfg = preset(name)
    split, rows = split_model(cfg, stages), 8
    largest = max(stage_memory(cfg, split, s, rows).total for s in range(stages))
    assert scoring_memory(cfg, split, rows) < largest


@pytest.mark.parametrize("name, stages", [("llama-small", 2), ("llama-small", 3), ("small", 3), ("tiny", 3)])
def test_the_held_out_pass_stays_within_one_and_a_half_largest_stage_miners(name, stages):
    """The attested held-out loss is one pass over heldout_batches (8) batches of 8 rows: the
    stated multiple (PROTOCOL.md §16.5) is 1.5 x the largest stage miner's training memory."""
    cfg = preset(name)
    split = split_model(cfg, stages)
    largest = max(stage_memory(cfg, split, s, 8).total for s in range(stages))
    assert scoring_memory(cfg, split, 8 * 8) <= 1.5 * largest
