"""Training and replay on the profile's device and dtype.

On CPU the device-independent paths run: an explicit placement, checkpoints handed back as
CPU copies, bf16 autocast (float32 params and moments). The CUDA tests need a GPU and skip
without one (CI has none): two runs of the same segment on the GPU give identical hashes, and a
replay on it matches."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from fixtures_training import MICRO, task

from protocol.core.checkpoint.format import checkpoint_hash, encode_checkpoint
from protocol.core.hardware.hardware_class import own_classes
from protocol.core.hardware.replay_profile import BF16_AUTOCAST, ReplayProfile
from protocol.core.model.gpt import Params, build_model, flatten
from protocol.core.model.placement import CPU, Placement, placement_of
from protocol.core.proof.replay import ReplayStatus, replay_segment
from protocol.core.proof.submission import Submission
from protocol.core.proof.work import build_work
from protocol.core.train import data
from protocol.core.train.training import (
    TrainedRound,
    batch_fn,
    fresh_checkpoint,
    run_steps,
    train_round,
)
from protocol.node.host_probe import this_host
from protocol.node.worker_pool import ProfileWorker
from validator.scoring import RoundEntry, usefulness_of

NO_CUDA = "no CUDA device: torch.cuda.is_available() is False"


def _hashes(trained: TrainedRound) -> list[bytes]:
    return [bytes(checkpoint_hash(c, MICRO)) for c in trained.checkpoints]


def test_an_explicit_cpu_placement_gives_the_default_bits(honest_sub: Submission, ds: data.Dataset,
                                                          theta: Params) -> None:
    placed = train_round(task(0), ds, theta, None, placement=Placement("cpu"))
    assert tuple(_hashes(placed)) == honest_sub.trace.checkpoint_hashes
    assert placement_of(ReplayProfile()) == CPU
    assert placement_of(ReplayProfile(device="cuda", dtype=BF16_AUTOCAST), rank=1) == Placement("cuda:1", True)


def test_checkpoints_come_back_as_cpu_copies(profile: ReplayProfile, ds: data.Dataset, theta: Params) -> None:
    model, states = build_model(MICRO), []
    start = fresh_checkpoint(task(0), theta, None)
    end, _ = run_steps(model, start, 2, batch_fn(task(0), ds), task(0).cfg,
                       lambda s: states.append({k: t.device for k, t in s.params.items()}),
                       placement=Placement("cpu"))
    tensors = [*end.params.values(), *end.exp_avg.values(), *end.exp_avg_sq.values()]
    assert {t.device.type for t in tensors} == {"cpu"} and {t.dtype for t in tensors} == {torch.float32}
    assert len(states) == 2 and {d.type for s in states for d in s.values()} == {"cpu"}
    before = checkpoint_hash(end, MICRO)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(1.0)  # the model trains on; the checkpoint it handed back must not move
    assert checkpoint_hash(end, MICRO) == before


def test_bf16_autocast_keeps_float32_state_and_is_its_own_class(honest_sub: Submission, ds: data.Dataset,
                                                                theta: Params, profile: ReplayProfile) -> None:
    bf16 = Placement("cpu", bf16_autocast=True)
    first = train_round(task(0), ds, theta, None, placement=bf16)
    again = train_round(task(0), ds, theta, None, placement=bf16)
    assert _hashes(first) == _hashes(again) and first.losses == again.losses  # reproducible
    end = first.checkpoints[-1]
    assert {t.dtype for d in (end.params, end.exp_avg, end.exp_avg_sq) for t in d.values()} == {torch.float32}
    assert _hashes(first)[1:] != list(honest_sub.trace.checkpoint_hashes[1:])  # other bits than float32...
    assert first.losses == pytest.approx(honest_sub.trace.losses, abs=1e-3)  # ...close to them (measured 1e-4)
    work = build_work(task(0), first, theta)
    blobs = [encode_checkpoint(c, MICRO) for c in first.checkpoints]
    bf16_profile = dataclasses.replace(profile, dtype=BF16_AUTOCAST)
    assert replay_segment(task(0), ds, work.trace, 1, blobs[1], blobs[2], bf16_profile).status is ReplayStatus.MATCH
    assert replay_segment(task(0), ds, work.trace, 1, blobs[1], blobs[2], profile).status is ReplayStatus.MISMATCH


def test_usefulness_on_an_explicit_device_is_the_default(honest_sub: Submission, ds: data.Dataset,
                                                         theta: Params) -> None:
    entries = [RoundEntry(task(0), 0, honest_sub.blob, True)]
    seed = bytes(32)
    assert usefulness_of(entries, ds, theta, seed, device="cpu") == usefulness_of(entries, ds, theta, seed)


# ---------------------------------------------------------------------------------------
# on a GPU (skipped without one)


def _cuda_class(dtype: str = "float32") -> ReplayProfile:
    return dataclasses.replace(own_classes(this_host())[-1], dtype=dtype)


def _cuda_round(profile: ReplayProfile) -> tuple[list[bytes], list[float], str]:
    """In a worker under `profile`: a round on its GPU, and segment 1 replayed there."""
    from fixtures_training import corpus, theta0

    ds, theta = corpus(), theta0()
    trained = train_round(task(0), ds, theta, None, placement=placement_of(profile))
    work = build_work(task(0), trained, theta)
    blobs = [encode_checkpoint(c, MICRO) for c in trained.checkpoints]
    replay = replay_segment(task(0), ds, work.trace, 1, blobs[1], blobs[2], profile)
    return _hashes(trained), trained.losses, str(replay.status)


@pytest.mark.skipif(not torch.cuda.is_available(), reason=NO_CUDA)
@pytest.mark.parametrize("dtype", ["float32", BF16_AUTOCAST])
def test_cuda_segments_replay_bit_for_bit(dtype: str, honest_sub: Submission) -> None:
    cls = _cuda_class(dtype)
    with ProfileWorker(cls) as worker:
        hashes, losses, status = worker.call(_cuda_round, cls)
        again, _, _ = worker.call(_cuda_round, cls)
    assert hashes == again and status == ReplayStatus.MATCH
    assert hashes[0] == honest_sub.trace.checkpoint_hashes[0]  # leaf 0 is θ_r, hashed from the CPU
    assert losses == pytest.approx(honest_sub.trace.losses, abs=1e-2)


@pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.device_count() < 2, reason="needs 2 CUDA devices")
def test_a_two_gpu_nccl_round_is_reproducible(ds: data.Dataset, theta: Params) -> None:
    from protocol.node.ddp_worker import DdpGroup

    cls = dataclasses.replace(_cuda_class(), world_size=2)
    runs = []
    for _ in range(2):
        with DdpGroup(cls, task(0), ds) as group:
            runs.append(train_round(task(0), ds, theta, None, stepper=group))
    assert _hashes(runs[0]) == _hashes(runs[1])
    assert float(torch.linalg.vector_norm(flatten(runs[0].checkpoints[-1].params) - flatten(theta))) > 0
