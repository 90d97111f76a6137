"""A staged round's scores (PROTOCOL.md §16.8), computed as a validator's worker does: each
pipeline's combined update scored as one miner's and split among its stages by work. Two honest
pipelines trained for real from the genesis state are both paid, each stage its share; a stage
that failed its check zeroes its whole pipeline and leaves the other's scores as they were; a
silent stage earns nothing and its pipeline-mate keeps its own share."""

from __future__ import annotations

import pytest
import torch

from protocol.config.run_config import RunConfig
from protocol.config.run_setup import resolve
from protocol.core.model.gpt import load_params
from protocol.core.pipeline.gpipe import fresh_state
from protocol.core.pipeline.stage_checkpoint import capture
from protocol.core.pipeline.stage_envelope import encode_stage_envelope
from protocol.core.pipeline.stage_module import StageModule, stage_params
from protocol.core.pipeline.stage_pay import stage_flops_per_token
from protocol.core.pipeline.stage_record import record_pipeline
from protocol.core.pipeline.stage_slots import StageSeat
from protocol.core.pipeline.staged_bundle import decode_model
from protocol.core.train.compress import compress, encode_update
from protocol.node.global_model import genesis_blob
from protocol.node.pipeline_batches import pipeline_batches
from validator.stage_scoring import PipelineEntries, StagedEntry, StageScoreJob, scored_stage_miners

SETUP = resolve(RunConfig(training={"preset": "micro", "stages": 2,
                                    "compute": {"inner_steps": 4, "checkpoint_every": 2, "batch_size": 4}}))
ROUND, CONTRACT = 0, "0x" + "11" * 20
PIPELINES = [("0x" + "a1" * 20, "0x" + "b1" * 20), ("0x" + "a2" * 20, "0x" + "b2" * 20)]
FAILED = "a stage of its pipeline failed its check"


@pytest.fixture(scope="module")
def trained():
    """θ_0 and every stage's envelope of both pipelines, trained honestly."""
    blob, state_hash = genesis_blob(SETUP.spec)
    theta = decode_model(blob, SETUP.model, SETUP.stage_split, state_hash).params
    split, cfg = SETUP.stage_split, SETUP.compute
    envelopes = []
    for p, members in enumerate(PIPELINES):
        modules = [StageModule(SETUP.model, split, s) for s in range(2)]
        for s, m in enumerate(modules):
            load_params(m, stage_params(theta, split, s))
        states = [fresh_state(m) for m in modules]
        start = [stage_params(theta, split, s) for s in range(2)]
        records = record_pipeline(modules, states, pipeline_batches(SETUP, ROUND, members), cfg,
                                  SETUP.spec.microbatches, ROUND, p)
        row = []
        for s in range(2):
            end = capture(modules[s], states[s], cfg.inner_steps).params
            delta = torch.cat([(start[s][k] - end[k]).reshape(-1) for k in start[s]])
            update = encode_update(compress(delta, cfg.chunk, cfg.topk, cfg.bits))
            row.append(encode_stage_envelope(1, CONTRACT, members[s], StageSeat(ROUND, p, s, 2), records[s].trace,
                                             update))
        envelopes.append(row)
    return blob, state_hash, envelopes


def scores(trained, stages_of) -> dict[str, tuple[int, str]]:
    blob, state_hash, envelopes = trained
    pipelines = [PipelineEntries(members, tuple(stages_of(p, s, members[s], envelopes[p][s]) for s in range(2)))
                 for p, members in enumerate(PIPELINES)]
    job = StageScoreJob(SETUP.spec, SETUP.run_seed, ROUND, blob, state_hash, pipelines, b"\x07" * 32, 1 << 24)
    return {m.lower(): v for m, v in scored_stage_miners(job).items()}


def honest(p, s, miner, envelope):
    return StagedEntry(miner, 2 * p + s, envelope, True)


def test_honest_pipelines_are_paid_each_stage_its_share_by_work(trained):
    got = scores(trained, honest)
    work = [stage_flops_per_token(SETUP.model, SETUP.stage_split, s) for s in range(2)]
    for a, b in PIPELINES:
        (sa, why_a), (sb, why_b) = got[a], got[b]
        assert sa > 0 and sb > 0 and why_a == why_b == "", got
        assert abs(sa * work[1] - sb * work[0]) <= sum(work)  # shares by work, rounded down


def test_a_failed_stage_zeroes_its_pipeline_alone(trained):
    before = scores(trained, honest)
    got = scores(trained, lambda p, s, m, e: StagedEntry(m, 2 * p + s, e, not (p == 1 and s == 1)))
    assert got[PIPELINES[1][0]] == got[PIPELINES[1][1]] == (0, FAILED)
    assert all(got[m] == before[m] for m in PIPELINES[0])  # the other pipeline is scored as before


def test_a_silent_stage_earns_nothing_and_its_neighbour_keeps_its_own_share(trained):
    before = scores(trained, honest)
    got = scores(trained, lambda p, s, m, e: None if (p, s) == (1, 1) else honest(p, s, m, e))
    assert PIPELINES[1][1] not in got  # it committed nothing: no column to pay
    assert got[PIPELINES[1][0]][0] > 0  # the steps both stages finished are paid
    assert all(got[m] == before[m] for m in PIPELINES[0])
