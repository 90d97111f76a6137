"""Tolerance mode checks everything exact mode binds (docs/PROTOCOL.md §10.5).

The attack: a miner whose class nobody holds is replayed within δ, not bit for bit. When only
the parameters were compared, a trace could carry made-up AdamW moments (a frozen trace: its
later leaves hold decayed parameters and invented moments), a steered RNG state or step counter,
or per-step losses of its choosing, and pass every tolerance challenge. Now the parameters and
both moments must be within δ (relative L2), every per-step loss within δ, and the step counter
and RNG state equal bit for bit."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest
import torch
from fixtures_training import MICRO, task

from protocol.core.checkpoint.format import Checkpoint, checkpoint_hash, encode_checkpoint
from protocol.core.hardware.replay_profile import ReplayProfile
from protocol.core.proof.replay import ReplayStatus, replay_segment
from protocol.core.proof.submission import Submission
from protocol.core.train.data import Dataset

SEGMENT = 1  # replays leaf 1 -> leaf 2


def _replay(sub: Submission, ds: Dataset, profile: ReplayProfile, end: Checkpoint,
            losses: tuple[float, ...] | None = None):  # type: ignore[no-untyped-def]
    """Replay SEGMENT in tolerance mode against a trace whose end leaf is `end` (and whose
    losses are `losses`), the start served honestly."""
    t0 = task(0)
    hashes = list(sub.trace.checkpoint_hashes)
    hashes[SEGMENT + 1] = checkpoint_hash(end, MICRO)
    trace = dataclasses.replace(sub.trace, checkpoint_hashes=tuple(hashes),
                                losses=losses if losses is not None else sub.trace.losses)
    return replay_segment(t0, ds, trace, SEGMENT, sub.fetch(SEGMENT, t0), encode_checkpoint(end, MICRO),
                          profile, mode="tolerance")


def _scaled(params: dict[str, torch.Tensor], factor: float) -> dict[str, torch.Tensor]:
    return {k: v * factor for k, v in params.items()}


def _nudged(params: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {**params, "ln_f.bias": params["ln_f.bias"] + 1e-7}  # far inside δ, not bit-equal


SPOOFS: dict[str, Callable[[Checkpoint, Checkpoint], Checkpoint]] = {
    # a frozen trace's leaf: the parameters pass (the honest ones, nudged), the moments are the
    # segment start's, decayed as if no gradient had come
    "frozen moments": lambda start, end: dataclasses.replace(
        end, params=_nudged(end.params), exp_avg=_scaled(start.exp_avg, 0.9 ** 2),
        exp_avg_sq=_scaled(start.exp_avg_sq, 0.95 ** 2)),
    "steered first moment": lambda start, end: dataclasses.replace(
        end, params=_nudged(end.params), exp_avg=_scaled(end.exp_avg, 1.01)),
    "steered second moment": lambda start, end: dataclasses.replace(
        end, params=_nudged(end.params), exp_avg_sq=_scaled(end.exp_avg_sq, 0.98)),
    "made-up RNG state": lambda start, end: dataclasses.replace(
        end, params=_nudged(end.params), rng=torch.roll(end.rng, 1)),
    "wrong step counter": lambda start, end: dataclasses.replace(end, params=_nudged(end.params), step=end.step + 1),
}


@pytest.mark.parametrize("spoof", list(SPOOFS))
def test_a_spoofed_leaf_fails_the_tolerance_check(spoof: str, honest_sub: Submission, ds: Dataset,
                                                  profile: ReplayProfile) -> None:
    start, end = honest_sub.checkpoints[SEGMENT], honest_sub.checkpoints[SEGMENT + 1]
    r = _replay(honest_sub, ds, profile, SPOOFS[spoof](start, end))
    assert r.status is ReplayStatus.MISMATCH, (spoof, r)
    assert r.max_abs_err < 1e-6  # the parameters alone would have passed


def test_losses_outside_delta_fail_and_inside_pass(honest_sub: Submission, ds: Dataset,
                                                   profile: ReplayProfile) -> None:
    end = dataclasses.replace(honest_sub.checkpoints[SEGMENT + 1],
                              params=_nudged(honest_sub.checkpoints[SEGMENT + 1].params))
    k = task(0).cfg.checkpoint_every
    at = SEGMENT * k  # the segment's first step

    def with_loss(factor: float) -> tuple[float, ...]:
        losses = list(honest_sub.trace.losses)
        losses[at] *= factor
        return tuple(losses)

    delta = task(0).cfg.tolerance
    assert _replay(honest_sub, ds, profile, end, with_loss(1 + 100 * delta)).status is ReplayStatus.MISMATCH
    assert _replay(honest_sub, ds, profile, end, with_loss(1 + delta / 10)).status is ReplayStatus.TOLERATED


def test_an_honest_leaf_off_by_rounding_is_tolerated(honest_sub: Submission, ds: Dataset,
                                                     profile: ReplayProfile) -> None:
    """What another machine's replay differs by: every tensor a little, nothing made up."""
    end = honest_sub.checkpoints[SEGMENT + 1]
    rounded = dataclasses.replace(end, params=_scaled(end.params, 1 + 1e-6), exp_avg=_scaled(end.exp_avg, 1 - 1e-6),
                                  exp_avg_sq=_scaled(end.exp_avg_sq, 1 + 1e-6))
    r = _replay(honest_sub, ds, profile, rounded)
    assert r.status is ReplayStatus.TOLERATED and 0 < r.rel_err < task(0).cfg.tolerance
