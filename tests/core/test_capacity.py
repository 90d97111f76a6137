"""Capacity-scaled work: the step counts a miner may commit, how it picks one, and that a
trace of fewer steps verifies under its own committed count and under no other."""

from __future__ import annotations

import dataclasses

import pytest
from fixtures_training import SMALL_CFG, task

from protocol.core.errors import ConfigError
from protocol.core.hardware.replay_profile import ReplayProfile
from protocol.core.model.gpt import Params
from protocol.core.proof.submission import honest
from protocol.core.proof.trace import zero_carry_hash
from protocol.core.proof.verdict import judge, verify_submission
from protocol.core.train.capacity import steps_for_window
from protocol.core.train.compute_config import ComputeConfig, StepCountError
from protocol.core.train.data import Dataset

CFG = ComputeConfig()  # H = 30, k = 3, q = 1: a miner may commit 3, 6, ..., 30


def test_the_allowed_step_counts_are_multiples_of_k_from_the_minimum_to_h():
    assert list(CFG.allowed_steps()) == list(range(3, 31, 3))
    assert list(ComputeConfig(min_inner_steps=12).allowed_steps()) == list(range(12, 31, 3))
    assert CFG.with_steps(0) is CFG and CFG.with_steps(30) is CFG  # 0 stands for H
    short = CFG.with_steps(9)
    assert (short.inner_steps, short.n_segments, short.min_steps, short.full_steps) == (9, 3, 3, 30)
    assert dataclasses.replace(short, inner_steps=30, min_inner_steps=0, round_steps=0) == CFG  # nothing else changes
    with pytest.raises(ConfigError, match="round_steps"):
        dataclasses.replace(CFG, round_steps=12)  # H itself can never shrink below a round


@pytest.mark.parametrize("steps", [1, 4, 31, 33, 60, -3])
def test_a_step_count_the_run_does_not_allow_is_refused(steps):
    with pytest.raises(StepCountError, match="inner steps"):
        CFG.with_steps(steps)
    with pytest.raises(StepCountError):
        ComputeConfig(min_inner_steps=12).with_steps(9)  # below the run's minimum


@pytest.mark.parametrize("bad", [{"min_inner_steps": 4}, {"min_inner_steps": 33}, {"min_inner_steps": -3},
                                 {"min_inner_steps": 3, "segments_per_validator": 2}])
def test_a_minimum_that_is_no_multiple_of_k_or_leaves_fewer_than_q_segments_is_refused(bad):
    with pytest.raises(ConfigError, match="min_inner_steps"):
        ComputeConfig(**bad)


def test_a_fast_machine_trains_h_and_a_slow_one_fewer_steps_never_below_the_minimum():
    # a 60 s window: 0.1 s per step fits 600 -> H; 3 s fits 20 -> 18 (a multiple of k)
    assert steps_for_window(CFG, 0.1, 60.0) == 30
    assert steps_for_window(CFG, 3.0, 60.0) == 18
    assert steps_for_window(CFG, 2.0, 60.0) == 30  # exactly H fits
    assert steps_for_window(CFG, 100.0, 60.0) == 3  # too slow for anything: the minimum
    assert steps_for_window(CFG, 1.0, -5.0) == 3  # the window already passed
    # one third of the speed -> one third of the steps (the devnet's throttled miner)
    assert steps_for_window(CFG, 0.3, 9.0) == 30 and steps_for_window(CFG, 0.9, 9.0) == 9


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), float("inf")])
def test_a_step_time_that_is_not_a_positive_number_is_refused(bad):
    with pytest.raises(ConfigError, match="seconds per step"):
        steps_for_window(CFG, bad, 60.0)


def test_a_shorter_round_verifies_under_its_committed_steps_and_under_no_other(
        profile: ReplayProfile, ds: Dataset, theta: Params):
    full = SMALL_CFG  # H = 6, k = 2
    short_cfg = full.with_steps(4)
    t = dataclasses.replace(task(3), cfg=short_cfg)
    sub = honest(t, ds, theta, None)
    assert len(sub.trace.losses) == 4 and len(sub.trace.checkpoint_hashes) == 3

    def verdict(cfg: ComputeConfig) -> str | None:
        v = verify_submission(dataclasses.replace(t, cfg=cfg), ds, theta, bytes(zero_carry_hash(t.model)), sub.root,
                              sub.trace, sub.blob, lambda leaf: sub.fetch(leaf, t), (0, 1), profile)
        j = judge(v)
        return None if j.kind is None else j.detail

    assert verdict(short_cfg) is None  # the committed 4 steps: every check holds
    assert "wrong number" in (verdict(full) or "")  # claimed as H = 6: the trace does not fit
