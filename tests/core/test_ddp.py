"""A multi-process miner on CPU: two gloo ranks, the micro preset, H=6, k=2 (3 segments).

Each `DdpGroup` spawns two processes that import torch (~3 s of CPU each, nearly all of a
group's cost), so the module starts six groups in all: the validator's group that replays the
round is also the second group that trains it."""

from __future__ import annotations

import dataclasses
import multiprocessing
import os
from typing import NamedTuple

import pytest
import torch
from fixtures_training import MICRO, make_profile, task

from protocol.core.checkpoint.format import checkpoint_hash, encode_checkpoint
from protocol.core.hardware.replay_profile import ProfileMismatch, ReplayProfile
from protocol.core.model.gpt import Params, flatten
from protocol.core.proof.replay import ReplayResult, ReplayStatus, replay_segment
from protocol.core.proof.submission import Submission
from protocol.core.proof.work import build_work
from protocol.core.train import data
from protocol.core.train.ddp import WorldSizeError, check_world_size, rank_order_mean, shard
from protocol.core.train.training import (
    ProcessGroupRequired,
    TrainedRound,
    fresh_checkpoint,
    local_stepper,
    train_round,
)
from protocol.node.ddp_worker import DdpError, DdpGroup

TWO = dataclasses.replace(make_profile(), world_size=2)  # 2 ranks x 1 thread, this host's ISA


def _hashes(trained: TrainedRound) -> list[str]:
    return [checkpoint_hash(c, MICRO).hex() for c in trained.checkpoints]


def _reaped(pids: list[int]) -> bool:
    """Whether every pid is gone: a zombie (exited, not reaped) still answers signal 0."""
    for pid in pids:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            continue
        return False
    return True


class TwoRuns(NamedTuple):
    first: TrainedRound
    second: TrainedRound
    pids: list[int]
    replays: list[ReplayResult]  # the first run's segments, replayed by the second run's group


@pytest.fixture(scope="module")
def two_runs(ds: data.Dataset, theta: Params, profile: ReplayProfile) -> TwoRuns:
    """The same round trained twice, each time by a fresh 2-process group; the second is the
    validator's own launcher (`hash_steps`), which then replays the first run's segments
    (`profile` applies this process's test profile, which `replay_segment` checks)."""
    with DdpGroup(TWO, task(0), ds) as group:
        assert len(group.pids) == 2
        first = train_round(task(0), ds, theta, None, stepper=group)
    pids = list(group.pids)
    work = build_work(task(0), first, theta)
    blobs = [encode_checkpoint(c, MICRO) for c in first.checkpoints]
    with DdpGroup(TWO, task(0), ds, hash_steps=True) as group:
        assert len(group.pids) == 2
        second = train_round(task(0), ds, theta, None, stepper=group)
        replays = [replay_segment(task(0), ds, work.trace, s, blobs[s], blobs[s + 1], TWO, stepper=group)
                   for s in range(3)]
    return TwoRuns(first, second, pids + group.pids, replays)


def test_a_two_process_round_is_bitwise_reproducible(two_runs: TwoRuns) -> None:
    first, second = two_runs.first, two_runs.second
    assert len(first.checkpoints) == 4 and len(first.losses) == 6
    assert _hashes(first) == _hashes(second)
    assert first.losses == second.losses


def test_the_group_left_no_process_behind(two_runs: TwoRuns) -> None:
    pids = two_runs.pids
    assert len(pids) == 4 and _reaped(pids)
    assert not set(pids) & {p.pid for p in multiprocessing.active_children()}


def test_close_to_the_single_process_miner_but_world_size_changes_the_bits(two_runs: TwoRuns, honest_sub: Submission,
                                                                           theta: Params) -> None:
    ddp = two_runs.first
    single = honest_sub.checkpoints  # task(0), one process
    assert checkpoint_hash(ddp.checkpoints[0], MICRO) == checkpoint_hash(single[0], MICRO)  # leaf 0 is θ_r
    assert ddp.losses[0] == pytest.approx(honest_sub.trace.losses[0], abs=1e-5)  # same batch, same weights
    for a, b in zip(ddp.losses, honest_sub.trace.losses, strict=True):
        assert a == pytest.approx(b, abs=1e-4)  # measured: within 5e-7
    a, b = flatten(ddp.checkpoints[-1].params), flatten(single[-1].params)
    moved = float(torch.linalg.vector_norm(b - flatten(theta)))
    assert float(torch.linalg.vector_norm(a - b)) < 1e-4 * moved  # the two end in the same place (measured 4e-6)...
    assert _hashes(ddp) != [checkpoint_hash(c, MICRO).hex() for c in single]  # ...in other bits


def test_a_validator_of_the_class_replays_it_bit_for_bit(two_runs: TwoRuns, ds: data.Dataset, theta: Params,
                                                         profile: ReplayProfile) -> None:
    ddp, results = two_runs.first, two_runs.replays
    work = build_work(task(0), ddp, theta)
    assert [r.status for r in results] == [ReplayStatus.MATCH] * 3
    assert all(r.losses_match and len(r.inner_hashes) == 2 for r in results)
    assert results[1].inner_hashes[-1] == work.trace.checkpoint_hashes[2]
    # one process (world size 1) does not reproduce a world-size-2 trace
    blobs = [encode_checkpoint(c, MICRO) for c in ddp.checkpoints]
    single = replay_segment(task(0), ds, work.trace, 1, blobs[1], blobs[2], profile)
    assert single.status is ReplayStatus.MISMATCH


def test_a_world_size_above_one_never_runs_in_one_process(ds: data.Dataset, theta: Params) -> None:
    from protocol.core.model.gpt import build_model
    from protocol.core.train.training import batch_fn

    with pytest.raises(ProcessGroupRequired, match="world size 2"):
        local_stepper(TWO, build_model(MICRO), batch_fn(task(0), ds), task(0).cfg)


def test_a_batch_that_does_not_split_evenly_is_refused_before_any_process_starts(ds: data.Dataset) -> None:
    before = set(multiprocessing.active_children())
    with pytest.raises(WorldSizeError, match="4 sequences cannot be split into 3"):
        DdpGroup(dataclasses.replace(TWO, world_size=3), task(0), ds)  # batch_size 4
    assert set(multiprocessing.active_children()) == before
    with pytest.raises(WorldSizeError):
        check_world_size(4, 0)
    with pytest.raises(WorldSizeError):
        shard(torch.zeros(5, 3), 0, 2)


def test_shards_and_the_rank_order_sum() -> None:
    x = torch.arange(12).reshape(6, 2)  # (B, T)
    assert torch.equal(torch.cat([shard(x, r, 3) for r in range(3)]), x)
    assert torch.equal(shard(x, 1, 2), x[3:])
    parts = [torch.tensor([1e8, 1.0]), torch.tensor([-1e8, 1.0]), torch.tensor([1.0, 1.0])]
    # ((1e8 + -1e8) + 1) / 3, in float32, and not (1e8 + (-1e8 + 1)) / 3 = 0
    assert rank_order_mean(parts).tolist() == [pytest.approx(1 / 3), 1.0]


def test_a_rank_that_cannot_run_the_profile_is_a_profile_mismatch(ds: data.Dataset) -> None:
    group = DdpGroup(dataclasses.replace(TWO, torch_version="0.0.1"), task(0), ds)
    with pytest.raises(ProfileMismatch) as info:
        with group:
            pass
    assert set(info.value.differences) == {"torch_version"}
    assert len(group.pids) == 2 and _reaped(group.pids)


def test_a_rank_that_fails_takes_the_group_down(theta: Params) -> None:
    short = data.from_bytes(bytes(range(256)) * 4, "short pages", page_tokens=16, heldout_every=2)  # < a block
    group = DdpGroup(TWO, task(0), short)
    with pytest.raises(DdpError, match="DatasetError"):
        with group:
            train_round(task(0), short, theta, None, stepper=group)
    assert _reaped(group.pids)
    with pytest.raises(DdpError, match="after close"):
        group(fresh_checkpoint(task(0), theta, None), 2)


def test_the_miner_and_validator_workers_train_and_replay_through_the_group(tmp_path, profile: ReplayProfile) -> None:
    """miner.work.produce and validator.work.check_miner under a world-size-2 class: the round
    is trained by two ranks, stored, and a validator of the class finds that the proof holds."""
    from miner.work import MinerJob, produce
    from protocol.config.run_setup import TrainingSpec
    from protocol.node.global_model import genesis_blob
    from validator.work import CheckJob, check_miner

    (tmp_path / "corpus").mkdir()
    (tmp_path / "corpus" / "a.txt").write_bytes(bytes(range(256)) * 400)
    (tmp_path / "blobs").mkdir()
    spec = TrainingSpec.model_validate({
        "preset": "micro", "profile": dataclasses.asdict(TWO),
        "dataset": {"source": "folder", "path": str(tmp_path / "corpus"), "page_tokens": 1024, "heldout_every": 10},
        "compute": {"inner_steps": 2, "checkpoint_every": 1, "batch_size": 2, "pages_per_miner": 2}})
    blob, state_hash = genesis_blob(spec)
    miner = "0x" + "ab" * 20
    out = produce(MinerJob(spec, b"seed", 0, miner, blob, state_hash, None, 1, "0x" + "cd" * 20,
                           blob_dir=str(tmp_path / "blobs")))
    assert out.steps == 2 and all(c is not None for c in out.checkpoints)
    leaves = {i: tmp_path / "blobs" / bytes(c).hex() for i, c in enumerate(out.checkpoints) if c is not None}
    check = check_miner(CheckJob(spec, b"seed", 0, miner, blob, state_hash, out.envelope, out.trace_root, None,
                                 dict(leaves), (0, 1), 1 << 30, out.steps))
    assert check.kind is None, check.detail
    assert [len(h) for h in check.inner_hashes] == [1, 1]
