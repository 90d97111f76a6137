"""A pipeline's score split among its stages by verified work (PROTOCOL.md §16.8): shares add up
to the pipeline's score less rounding, a bigger stage earns more, an embedding table earns
nothing for being large, one failed stage drops the whole pipeline's update and pay, and a silent stage loses its own
share alone."""

from __future__ import annotations

import pytest

from protocol.core.errors import ConfigError
from protocol.core.model.config import layout, preset
from protocol.core.pipeline.stage_pay import (
    present_stage_scores,
    stage_flops_per_token,
    stage_scores,
    stage_work,
)
from protocol.core.pipeline.stage_split import split_model

SCORE = 1_000_000_007


@pytest.mark.parametrize("name, stages", [("llama-small", 2), ("llama-small", 3), ("small", 3)])
def test_the_shares_add_up_to_the_pipelines_score_and_follow_the_flops(name, stages):
    cfg = preset(name)
    split = split_model(cfg, stages)
    work = stage_work(cfg, split, [30] * stages)
    shares = stage_scores(SCORE, work, [True] * stages)
    assert SCORE - stages < sum(shares) <= SCORE  # rounded down, at most a unit a stage
    ranked = sorted(range(stages), key=lambda s: work[s])
    assert [shares[s] for s in ranked] == sorted(shares)


def test_an_embedding_table_earns_nothing_for_its_size():
    cfg = preset("llama-small")
    split = split_model(cfg, 2)
    bigger = cfg.__class__(**{**cfg.__dict__, "vocab_size": 4 * cfg.vocab_size})
    table = layout(bigger)["tok_emb.weight"]
    assert table[0] == 4 * cfg.vocab_size
    # the first stage's table grows 4x; its FLOPs per token do not (the head, in the last stage, does)
    assert stage_flops_per_token(bigger, split_model(bigger, 2), 0) == stage_flops_per_token(cfg, split, 0)
    assert stage_flops_per_token(bigger, split_model(bigger, 2), 1) > stage_flops_per_token(cfg, split, 1)


def test_fewer_verified_steps_earn_less():
    cfg = preset("small")
    split = split_model(cfg, 2)
    full = stage_work(cfg, split, [30, 30])
    short = stage_work(cfg, split, [30, 15])
    assert short[1] * 2 == full[1] and short[0] == full[0]


def test_one_failed_stage_drops_the_pipelines_pay_and_bad_inputs_are_refused():
    assert stage_scores(SCORE, [3, 2, 5], [True, False, True]) == (0, 0, 0)
    assert stage_scores(0, [3, 2], [True, True]) == (0, 0)
    with pytest.raises(ConfigError):
        stage_scores(SCORE, [3, 0], [True, True])
    with pytest.raises(ConfigError):
        stage_scores(SCORE, [3, 2], [True])
    with pytest.raises(ConfigError):
        stage_scores(-1, [3, 2], [True, True])
    with pytest.raises(ConfigError):
        stage_work(preset("small"), split_model(preset("small"), 2), [30])


def test_a_silent_stage_loses_its_own_share_and_the_others_keep_exactly_theirs():
    work = [3, 2, 5]
    whole = stage_scores(SCORE, work, [True] * 3)
    assert present_stage_scores(SCORE, work, [True, False, True]) == (whole[0], 0, whole[2])  # not handed on
    assert present_stage_scores(SCORE, work, [True] * 3) == whole
    with pytest.raises(ConfigError):
        present_stage_scores(SCORE, work, [True, True])
