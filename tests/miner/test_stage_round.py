"""A stage miner's round over the stage link (PROTOCOL.md §16.3, §16.4): three stages of a Llama
on three libp2p hosts on 127.0.0.1 train H = 4 steps, microbatch by microbatch as the tensors
arrive, and each stage's trace (state hashes and boundary roots) is the one the same round trained
in one process commits, bit for bit; every segment of every stage then replays exactly. A stage
that stops answering after step 2 ends the round for its pipeline at step 2: the others commit
the first segment (the steps every stage finished), each naming the neighbour it waited for."""

from __future__ import annotations

import dataclasses

import pytest
import torch
import trio

from miner.stage_round import StageLinks, StageRound, run_stage_round
from protocol.core.model.config import preset
from protocol.core.model.gpt import init_params, load_params
from protocol.core.pipeline.gpipe import fresh_state
from protocol.core.pipeline.stage_module import StageModule, stage_params
from protocol.core.pipeline.stage_record import record_pipeline
from protocol.core.pipeline.stage_replay import (
    ServedSegment,
    StageReplayStatus,
    StageTask,
    replay_stage_segment,
)
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


async def run_pipeline(tmp_path, stage_modules, steps_of, wait_s) -> list[StageRound]:
    """Every stage on its own host, each given `steps_of[s]` of the round's batches."""
    from protocol.core.pipeline.stage_slots import StageSeat

    rounds: dict[int, StageRound] = {}
    async with cluster(tmp_path, 3) as c:
        keys = [n.identity.public_key for n in c.nodes]
        addrs = [[split_multiaddr(n.listen_addr)[0]] for n in c.nodes]
        links = []
        for s, node in enumerate(c.nodes):
            inbox = StageInbox(node.config, node.registry, node.limiter)
            inbox.mount(node.host)
            inbox.expect_neighbours(ROUND, PIPELINE, s, keys, boundary_shape(MODEL, ROWS // COUNT),
                                    CFG.inner_steps, COUNT)
            links.append(StageLinks(inbox, StageSender(node.host, node.dialer, node.identity, node.config),
                                    keys, addrs, wait_s))
        data = batches(CFG.inner_steps)

        async def stage(s: int) -> None:
            module = stage_modules[s]
            rounds[s] = await run_stage_round(module, fresh_state(module), StageSeat(ROUND, PIPELINE, s, 3), CFG,
                                              COUNT, data[: steps_of[s]], links[s])

        async with trio.open_nursery() as nursery:
            for s in range(3):
                nursery.start_soon(stage, s)
    return [rounds[s] for s in range(3)]


@pytest.mark.trio
async def test_three_stages_on_three_hosts_commit_the_in_process_traces_and_replay_exactly(tmp_path):
    reference = modules()
    records = record_pipeline(reference, [fresh_state(m) for m in reference], batches(CFG.inner_steps), CFG, COUNT,
                              ROUND, PIPELINE)
    with trio.fail_after(120):
        rounds = await run_pipeline(tmp_path, modules(), [CFG.inner_steps] * 3, WAIT_S)
    for done, ref in zip(rounds, records, strict=True):
        assert done.silent is None and done.steps == CFG.inner_steps
        assert done.record.trace == ref.trace
        assert stage_trace_root(done.record.trace) == stage_trace_root(ref.trace)
    data = batches(CFG.inner_steps)
    for s, done in enumerate(rounds):  # a validator replays every segment from what the stage kept
        task = StageTask(MODEL, SPLIT, CFG, COUNT, done.record.seat)
        for j in range(CFG.n_segments):
            steps = done.record.segment(j)
            served = ServedSegment(done.record.starts[j], tuple(io.hashes for io in steps),
                                   tuple(io.received for io in steps))
            k = CFG.checkpoint_every
            result = replay_stage_segment(task, done.record.trace, j, served, data[j * k:(j + 1) * k])
            assert result.status is StageReplayStatus.EXACT, (s, j, result)


@pytest.mark.trio
async def test_a_stage_that_stops_answering_ends_its_pipeline_at_the_steps_every_stage_finished(tmp_path):
    reference = modules()
    records = record_pipeline(reference, [fresh_state(m) for m in reference], batches(CFG.inner_steps), CFG, COUNT,
                              ROUND, PIPELINE)
    wait_s, margin_s = 2.0, 30.0  # margin: the whole round on 2 busy cores
    start = trio.current_time()
    with trio.fail_after(wait_s + margin_s + 60):
        rounds = await run_pipeline(tmp_path, modules(), [4, 4, 2], wait_s)  # stage 2 stops after step 2
    assert trio.current_time() - start >= wait_s  # the others waited for it, once
    first, middle, last = rounds
    assert [r.steps for r in rounds] == [2, 2, 2]  # the first segment: what every stage finished
    assert last.silent is None  # it believes its round was two steps long
    assert middle.silent is not None and middle.silent.stage == 2  # it waited for stage 2's gradient
    assert middle.silent.slot.step == 3 and middle.silent.slot.stage == 2
    assert first.silent is not None and first.silent.stage == 1  # it waited on its own neighbour
    for done, ref in zip(rounds, records, strict=True):  # the committed segment is the honest one
        assert done.record.trace.checkpoint_hashes == ref.trace.checkpoint_hashes[:2]
        assert done.record.trace.boundary_roots == ref.trace.boundary_roots[:1]
        assert len(done.record.steps) == 2 and done.end.step == 2
