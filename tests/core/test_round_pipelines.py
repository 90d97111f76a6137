"""A round's pipelines from chain data (PROTOCOL.md §16.3): the formation seed, a miner's seat, and
the pipeline's data account."""

from __future__ import annotations

import pytest

from protocol.core.pipeline.formation import StageMiner, form_pipelines
from protocol.core.pipeline.round_pipelines import pipeline_account, pipeline_seed, seat_of

RUN = b"\x11" * 32


def addr(i: int) -> str:
    return "0x" + f"{i:040x}"


def test_the_seed_depends_on_the_run_the_round_and_the_previous_seed_only():
    base = pipeline_seed(RUN, 4, b"\x01" * 32)
    assert base == pipeline_seed(RUN, 4, b"\x01" * 32)
    assert len({base, pipeline_seed(RUN, 5, b"\x01" * 32), pipeline_seed(b"\x12" * 32, 4, b"\x01" * 32),
                pipeline_seed(RUN, 4, b"\x02" * 32)}) == 4
    with pytest.raises(ValueError):
        pipeline_seed(RUN, 4, b"\x01")


def test_every_seated_miner_finds_its_pipeline_and_stage_and_a_spare_finds_none():
    by_stage = [[StageMiner(addr(i), 0) for i in range(3)], [StageMiner(addr(10 + i), 0) for i in range(2)]]
    pipelines = form_pipelines(pipeline_seed(RUN, 0, bytes(32)), by_stage)
    assert len(pipelines) == 2
    seated = [m for p in pipelines for m in p]
    for p, members in enumerate(pipelines):
        for s, miner in enumerate(members):
            seat = seat_of(pipelines, miner.upper().replace("0X", "0x"))
            assert seat is not None and (seat.pipeline, seat.stage, seat.members) == (p, s, members)
    spare = next(m.address for m in by_stage[0] if m.address not in seated)
    assert seat_of(pipelines, spare) is None
    assert pipeline_account(pipelines[0]) == bytes.fromhex(pipelines[0][0][2:])
