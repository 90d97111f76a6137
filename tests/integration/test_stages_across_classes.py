"""Adjacent pipeline stages on machines of different hardware classes (PROTOCOL.md §16.5): stage 0
computes in a worker process of class cpu/…/1t, stage 1 in one of cpu/…/2t, each behind its own
libp2p host, the tensors crossing the stage link. Each stage is then replayed exactly by a worker
of its own class: only the bytes between the stages must match. (At these tiny shapes the two
classes happen to give the same bits; what is shown is that nothing but the boundary bytes is
shared.) When stage 1's worker process is killed after step 2, stage 0 commits the steps both
finished (the first segment) and still replays exactly; the killed stage commits nothing, so it
alone loses the round."""

from __future__ import annotations

import dataclasses
import os
import signal
from concurrent.futures.process import BrokenProcessPool

import pytest
import torch
import trio

from miner.stage_round import StageLinks, StageRound, run_stage_round
from miner.stage_worker import StageJob, stage_call, stage_open
from protocol.config.run_setup import TrainingSpec
from protocol.core.hardware.hardware_class import label
from protocol.core.model.config import preset
from protocol.core.model.gpt import init_params
from protocol.core.pipeline.stage_module import stage_params
from protocol.core.pipeline.stage_record import StageRecord
from protocol.core.pipeline.stage_replay import (
    ServedSegment,
    StageTask,
    replay_stage_segment,
)
from protocol.core.pipeline.stage_slots import StageSeat
from protocol.core.pipeline.stage_split import split_model
from protocol.core.train.compute_config import ComputeConfig
from protocol.core.wire.boundary_tensor import boundary_shape
from protocol.node.worker_pool import ProfileWorker
from protocol.p2p.host import split_multiaddr
from protocol.p2p.stage_inbox import StageInbox
from protocol.p2p.stage_link import StageSender
from tests.p2p.conftest import cluster

pytestmark = pytest.mark.slow

MODEL = preset("llama-micro")  # two blocks: two stages
SPLIT = split_model(MODEL, 2)
CFG = ComputeConfig(inner_steps=4, checkpoint_every=2)
ROWS, COUNT, ROUND, PIPELINE = 4, 2, 7, 0
SHAPE = boundary_shape(MODEL, ROWS)  # a microbatch of ROWS rows
ONE = TrainingSpec().profile
CLASSES = (ONE, dataclasses.replace(ONE, threads=2))  # two hardware classes this host runs
WAIT_S = 30.0  # a tensor's wait in the honest round
# the killed round: long enough that no honest tensor of steps 1-2 misses it on a loaded host, short
# enough that the wait for the dead stage does not dominate the test
KILLED_WAIT_S = 10.0


def batches() -> list[tuple[torch.Tensor, torch.Tensor]]:
    gen = torch.Generator().manual_seed(5)
    shape = (ROWS * COUNT, MODEL.block_size)
    return [(torch.randint(0, MODEL.vocab_size, shape, generator=gen),
             torch.randint(0, MODEL.vocab_size, shape, generator=gen)) for _ in range(CFG.inner_steps)]


def replay_all(record: StageRecord) -> list[str]:
    """Every committed segment of `record` replayed (run in a validator's worker of the stage's class)."""
    task, data, k = StageTask(MODEL, SPLIT, CFG, COUNT, record.seat), batches(), CFG.checkpoint_every
    out = []
    for j in range(record.trace.segments):
        steps = record.segment(j)
        served = ServedSegment(record.starts[j], tuple(io.hashes for io in steps), tuple(io.received for io in steps))
        out.append(replay_stage_segment(task, record.trace, j, served, data[j * k:(j + 1) * k]).status.value)
    return out


def kill(worker: ProfileWorker) -> None:
    for pid in list(worker._pool._processes):  # type: ignore[union-attr]  # the node's machine goes down
        os.kill(pid, signal.SIGKILL)


async def run_round(tmp_path, workers: list[ProfileWorker], wait_s: float,
                    kill_after: int | None = None) -> list[StageRound | None]:
    params = init_params(MODEL, 4)
    seats = [StageSeat(ROUND, PIPELINE, s, 2) for s in range(2)]
    for s, (worker, seat) in enumerate(zip(workers, seats, strict=True)):
        worker.call(stage_open, StageJob(MODEL, seat, CFG, COUNT, stage_params(params, SPLIT, s), batches()))
    rounds: list[StageRound | None] = [None, None]
    async with cluster(tmp_path, 2) as c:
        keys = [n.identity.public_key for n in c.nodes]
        addrs = [[split_multiaddr(n.listen_addr)[0]] for n in c.nodes]

        async def stage(s: int) -> None:
            node, worker, seat = c.nodes[s], workers[s], seats[s]
            inbox = StageInbox(node.config, node.registry, node.limiter)
            inbox.mount(node.host)
            inbox.expect_neighbours(ROUND, PIPELINE, s, keys, SHAPE, CFG.inner_steps, COUNT)
            links = StageLinks(inbox, StageSender(node.host, node.dialer, node.identity, node.config), keys, addrs,
                               wait_s)

            async def compute(method: str, *args):
                return await trio.to_thread.run_sync(worker.call, stage_call, seat, method, *args)

            def on_step(step: int) -> None:
                if s == 1 and step == kill_after:
                    kill(worker)
            try:
                rounds[s] = await run_stage_round(seat, CFG.inner_steps, COUNT, SHAPE, links, compute, on_step)
            except BrokenProcessPool:
                rounds[s] = None  # the killed stage: nothing to commit

        async with trio.open_nursery() as nursery:
            for s in range(2):
                nursery.start_soon(stage, s)
    return rounds


@pytest.mark.trio
async def test_adjacent_stages_of_two_classes_each_replay_exactly_and_a_killed_stage_alone_loses(tmp_path):
    assert label(CLASSES[0]) != label(CLASSES[1])
    workers = [ProfileWorker(c).start() for c in CLASSES]
    killed = ProfileWorker(CLASSES[1]).start()
    try:
        for w in (*workers, killed):
            w.ready()
        with trio.fail_after(180):
            honest = await run_round(tmp_path / "honest", workers, WAIT_S)
        for s, done in enumerate(honest):
            assert done is not None and done.silent is None and done.steps == CFG.inner_steps
            # a validator of the stage's own class: a fresh call into a worker of that class
            assert workers[s].call(replay_all, done.outcome.record) == ["exact"] * CFG.n_segments, s
        with trio.fail_after(180):
            crashed = await run_round(tmp_path / "killed", [workers[0], killed], KILLED_WAIT_S, kill_after=2)
        first, second = crashed
        assert second is None  # the killed stage has nothing to commit
        assert first is not None and first.steps == CFG.checkpoint_every and first.silent is not None
        assert first.silent.stage == 1 and first.silent.slot.step == CFG.checkpoint_every + 1
        assert workers[0].call(replay_all, first.outcome.record) == ["exact"]
        # the steps it commits are the honest round's first segment, bit for bit
        assert first.outcome.record.trace.checkpoint_hashes == honest[0].outcome.record.trace.checkpoint_hashes[:2]
    finally:
        for w in (*workers, killed):
            w.close()
