"""Tolerance mode checks everything exact mode binds (docs/PROTOCOL.md §10.5).

The attack: a miner whose class nobody holds is replayed within δ, not bit for bit. When only
the parameters were compared, a trace could carry made-up AdamW moments (a frozen trace: its
later leaves hold decayed parameters and invented moments), a steered RNG state or step counter,
or per-step losses of its choosing, and pass every tolerance challenge. Now the parameters and
both moments must be within δ (relative L2), every per-step loss within δ, and the step counter
and RNG state equal bit for bit, on a model with dropout too (the presets draw nothing)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest
import torch
from fixtures_training import MICRO, task

from protocol.core.checkpoint.format import Checkpoint, checkpoint_hash, encode_checkpoint
from protocol.core.errors import ConfigError
from protocol.core.hardware.replay_profile import ReplayProfile
from protocol.core.model.config import config_hash
from protocol.core.model.gpt import init_params
from protocol.core.proof.replay import ReplayStatus, replay_segment
from protocol.core.proof.submission import Submission, honest
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


# -- the RNG on a model that draws from it --------------------------------------------------------

DROPOUT = dataclasses.replace(MICRO, dropout=0.1)


@pytest.fixture(scope="module")
def dropout_sub(profile: ReplayProfile, ds: Dataset) -> Submission:
    """An honest micro round of a model with residual dropout: every step draws masks."""
    return honest(task(0, model=DROPOUT), ds, init_params(DROPOUT, 0), None)


def _replay_dropout(sub: Submission, ds: Dataset, profile: ReplayProfile, end: Checkpoint, mode: str):  # type: ignore[no-untyped-def]
    t0 = task(0, model=DROPOUT)
    hashes = list(sub.trace.checkpoint_hashes)
    hashes[SEGMENT + 1] = checkpoint_hash(end, DROPOUT)
    trace = dataclasses.replace(sub.trace, checkpoint_hashes=tuple(hashes))
    return replay_segment(t0, ds, trace, SEGMENT, sub.fetch(SEGMENT, t0), encode_checkpoint(end, DROPOUT),
                          profile, mode=mode)


def test_dropout_draws_from_the_trace_generator_and_replays_bit_for_bit(dropout_sub: Submission, ds: Dataset,
                                                                        profile: ReplayProfile) -> None:
    start, end = dropout_sub.checkpoints[SEGMENT], dropout_sub.checkpoints[SEGMENT + 1]
    assert not torch.equal(start.rng, end.rng)  # the masks advanced the generator
    assert _replay_dropout(dropout_sub, ds, profile, end, "exact").status is ReplayStatus.MATCH
    nudged = dataclasses.replace(end, params=_nudged(end.params))  # another class's rounding
    assert _replay_dropout(dropout_sub, ds, profile, nudged, "tolerance").status is ReplayStatus.TOLERATED


def test_presets_draw_nothing(honest_sub: Submission) -> None:
    first, last = honest_sub.checkpoints[0], honest_sub.checkpoints[-1]
    assert torch.equal(first.rng, last.rng)


@pytest.mark.parametrize("spoof", ["frozen RNG", "steered RNG"])
def test_a_dropout_leaf_with_a_spoofed_rng_fails_the_tolerance_check(spoof: str, dropout_sub: Submission,
                                                                     ds: Dataset, profile: ReplayProfile) -> None:
    """A frozen trace keeps the segment start's generator state; a steered one picks its own:
    both fail bit for bit, though the parameters and moments pass within δ."""
    start, end = dropout_sub.checkpoints[SEGMENT], dropout_sub.checkpoints[SEGMENT + 1]
    rng = start.rng if spoof == "frozen RNG" else torch.roll(end.rng, 7)
    r = _replay_dropout(dropout_sub, ds, profile, dataclasses.replace(end, params=_nudged(end.params), rng=rng),
                        "tolerance")
    assert r.status is ReplayStatus.MISMATCH and r.max_abs_err < 1e-6, r


def test_a_dropout_config_keeps_presets_hashes_and_refuses_bad_rates() -> None:
    assert config_hash(dataclasses.replace(MICRO, dropout=0.0)) == config_hash(MICRO)
    assert config_hash(DROPOUT) != config_hash(MICRO)
    with pytest.raises(ConfigError, match="dropout"):
        dataclasses.replace(MICRO, dropout=1.0)
