"""A stage miner's round over the stage link (PROTOCOL.md §16.4): three stages of a Llama on three
libp2p hosts on 127.0.0.1 train H = 4 steps, microbatch by microbatch as the tensors arrive, and
each stage's trace (state hashes and boundary roots) is the one the same round trained in one
process commits, bit for bit, whether each stage computes in the node's process or, as a node
runs it, in its own profile worker; every segment of every stage then replays exactly. A stage
that stops answering after step 2 ends the round for its pipeline at step 2: the others commit
the first segment (the steps every stage finished), each naming the neighbour it waited for."""

from __future__ import annotations

import dataclasses

import pytest
import torch
import trio

from miner.stage_round import StageLinks, StageRound, run_stage_round
from miner.stage_worker import StageJob, stage_call, stage_open
from protocol.core.model.config import preset
from protocol.core.model.gpt import init_params, load_params
from protocol.core.pipeline.gpipe import fresh_state
from protocol.core.pipeline.stage_driver import StageDriver
from protocol.core.pipeline.stage_module import StageModule, stage_params
from protocol.core.pipeline.stage_record import record_pipeline
from protocol.core.pipeline.stage_replay import (
    ServedSegment,
    StageReplayStatus,
    StageTask,
    replay_stage_segment,
)
from protocol.core.pipeline.stage_slots import StageSeat
from protocol.core.pipeline.stage_split import split_model
from protocol.core.pipeline.stage_trace import stage_trace_root
from protocol.core.train.compute_config import ComputeConfig
from protocol.core.wire.boundary_tensor import boundary_shape
from protocol.p2p.host import split_multiaddr
from protocol.p2p.stage_inbox import StageInbox
from protocol.p2p.stage_link import StageSender
from tests.p2p.conftest import cluster

MODEL = dataclasses.replace(preset("llama-micro"), n_layer=3)  # three blocks: three stages
SPLIT = split_model(MODEL, 3)
CFG = ComputeConfig(inner_steps=4, checkpoint_every=2)
ROWS, COUNT, ROUND, PIPELINE = 4, 2, 5, 0
SHAPE = boundary_shape(MODEL, ROWS // COUNT)
WAIT_S = 20.0  # a tensor's wait in the honest run (each step takes well under a second)


def modules() -> list[StageModule]:
    params = init_params(MODEL, 3)
    out = [StageModule(MODEL, SPLIT, s) for s in range(3)]
    for s, module in enumerate(out):
        load_params(module, stage_params(params, SPLIT, s))
    return out


def batches(steps: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    gen = torch.Generator().manual_seed(9)
    shape = (ROWS, MODEL.block_size)
    return [(torch.randint(0, MODEL.vocab_size, shape, generator=gen),
             torch.randint(0, MODEL.vocab_size, shape, generator=gen)) for _ in range(steps)]


def in_process(module: StageModule, seat: StageSeat, steps: int):
    """A driver in this process, its calls on a thread (the trio loop keeps serving the link)."""
    driver = StageDriver(module, fresh_state(module), seat, CFG, COUNT, batches(CFG.inner_steps)[:steps])

    async def compute(method: str, *args):
        return await trio.to_thread.run_sync(getattr(driver, method), *args)
    return compute


async def run_pipeline(tmp_path, computes, steps_of, wait_s) -> list[StageRound]:
    """Every stage on its own host, stage s running `steps_of[s]` steps with `computes[s]`."""
    rounds: dict[int, StageRound] = {}
    async with cluster(tmp_path, len(computes)) as c:
        keys = [n.identity.public_key for n in c.nodes]
        addrs = [[split_multiaddr(n.listen_addr)[0]] for n in c.nodes]
        links = []
        for s, node in enumerate(c.nodes):
            inbox = StageInbox(node.config, node.registry, node.limiter)
            inbox.mount(node.host)
            inbox.expect_neighbours(ROUND, PIPELINE, s, keys, SHAPE, CFG.inner_steps, COUNT)
            links.append(StageLinks(inbox, StageSender(node.host, node.dialer, node.identity, node.config),
                                    keys, addrs, wait_s))

        async def stage(s: int) -> None:
            seat = StageSeat(ROUND, PIPELINE, s, len(computes))
            rounds[s] = await run_stage_round(seat, steps_of[s], COUNT, SHAPE, links[s], computes[s])

        async with trio.open_nursery() as nursery:
            for s in range(len(computes)):
                nursery.start_soon(stage, s)
    return [rounds[s] for s in range(len(computes))]


def reference_traces() -> list:
    """Every stage's trace of the round trained in one process (run in a profile worker)."""
    reference = modules()
    records = record_pipeline(reference, [fresh_state(m) for m in reference], batches(CFG.inner_steps), CFG, COUNT,
                              ROUND, PIPELINE)
    return [r.trace for r in records]


def seats(stages: int = 3) -> list[StageSeat]:
    return [StageSeat(ROUND, PIPELINE, s, stages) for s in range(stages)]


def replays_exactly(done: StageRound, s: int) -> None:
    """A validator replays every segment of the stage from what it kept."""
    record, data, k = done.outcome.record, batches(CFG.inner_steps), CFG.checkpoint_every
    task = StageTask(MODEL, SPLIT, CFG, COUNT, record.seat)
    for j in range(record.trace.segments):
        steps = record.segment(j)
        served = ServedSegment(record.starts[j], tuple(io.hashes for io in steps), tuple(io.received for io in steps))
        result = replay_stage_segment(task, record.trace, j, served, data[j * k:(j + 1) * k])
        assert result.status is StageReplayStatus.EXACT, (s, j, result)


@pytest.mark.trio
async def test_three_stages_on_three_hosts_commit_the_in_process_traces_and_replay_exactly(tmp_path):
    reference = modules()
    records = record_pipeline(reference, [fresh_state(m) for m in reference], batches(CFG.inner_steps), CFG, COUNT,
                              ROUND, PIPELINE)
    computes = [in_process(m, seat, CFG.inner_steps) for m, seat in zip(modules(), seats(), strict=True)]
    with trio.fail_after(120):
        rounds = await run_pipeline(tmp_path, computes, [CFG.inner_steps] * 3, WAIT_S)
    for s, (done, ref) in enumerate(zip(rounds, records, strict=True)):
        assert done.silent is None and done.steps == CFG.inner_steps
        assert done.outcome.record.trace == ref.trace
        assert stage_trace_root(done.outcome.record.trace) == stage_trace_root(ref.trace)
        replays_exactly(done, s)


@pytest.mark.trio
async def test_each_stage_computing_in_its_own_profile_worker_gives_the_same_traces(tmp_path):
    """As a node runs it: the driver in the class's worker process, the link in the node."""
    from protocol.config.run_setup import TrainingSpec
    from protocol.node.worker_pool import ProfileWorker

    params = init_params(MODEL, 3)
    workers = [ProfileWorker(TrainingSpec().profile).start() for _ in range(4)]
    try:
        reference = workers[3].ready().call(reference_traces)  # the whole pipeline under the same profile
        computes = []
        for s, (worker, seat) in enumerate(zip(workers[:3], seats(), strict=True)):
            worker.ready().call(stage_open, StageJob(MODEL, seat, CFG, COUNT, stage_params(params, SPLIT, s),
                                                     batches(CFG.inner_steps)))

            async def compute(method: str, *args, worker=worker, seat=seat):
                return await trio.to_thread.run_sync(worker.call, stage_call, seat, method, *args)
            computes.append(compute)
        with trio.fail_after(120):
            rounds = await run_pipeline(tmp_path, computes, [CFG.inner_steps] * 3, WAIT_S)
    finally:
        for worker in workers:
            worker.close()
    assert [r.outcome.record.trace for r in rounds] == reference
    with pytest.raises(ValueError, match="no call"):
        stage_call(seats()[0], "__init__")


@pytest.mark.trio
async def test_a_stage_that_stops_answering_ends_its_pipeline_at_the_steps_every_stage_finished(tmp_path):
    reference = modules()
    records = record_pipeline(reference, [fresh_state(m) for m in reference], batches(CFG.inner_steps), CFG, COUNT,
                              ROUND, PIPELINE)
    steps_of = [4, 4, 2]  # stage 2 stops answering after step 2
    computes = [in_process(m, seat, n) for m, seat, n in zip(modules(), seats(), steps_of, strict=True)]
    wait_s, margin_s = 8.0, 30.0  # the wait: no honest tensor misses it on a loaded host; margin: the round
    start = trio.current_time()
    with trio.fail_after(wait_s + margin_s + 60):
        rounds = await run_pipeline(tmp_path, computes, steps_of, wait_s)
    assert trio.current_time() - start >= wait_s  # the others waited for it, once
    first, middle, last = rounds
    assert [r.steps for r in rounds] == [2, 2, 2]  # the first segment: what every stage finished
    assert last.silent is None  # it believes its round was two steps long
    assert middle.silent is not None and middle.silent.stage == 2  # it waited for stage 2's gradient
    assert middle.silent.slot.step == 3 and middle.silent.slot.stage == 2
    assert first.silent is not None and first.silent.stage == 1  # it waited on its own neighbour
    for s, (done, ref) in enumerate(zip(rounds, records, strict=True)):  # the committed segment is the honest one
        assert done.outcome.record.trace.checkpoint_hashes == ref.trace.checkpoint_hashes[:2]
        assert done.outcome.record.trace.boundary_roots == ref.trace.boundary_roots[:1]
        assert len(done.outcome.record.steps) == 2 and done.outcome.end.step == 2
        replays_exactly(done, s)
