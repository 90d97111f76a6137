"""A staged round's scores (docs/PROTOCOL.md §16.8), in the validator's worker: each pipeline's
combined update scored as one miner's, and split among its stages by verified work.

A pipeline's combined update is every committed stage's update over θ_r, decoded and laid end to
end in model order (a stage that committed nothing adds zeros), then compressed by the run's rule
as a whole model's (deterministic at every validator; chunks that straddle a stage boundary are
re-selected). It is scored with the pipeline's own batches (its stage-0 miner's pages). If any
committed stage of the pipeline failed its check, every stage scores 0 (the update is dropped);
a stage that committed nothing (silent, killed) scores 0, and each other stage its own share of
the score by work (`stage_pay`): the silent stage's share is lost, not handed to the others.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from protocol.config.run_setup import Setup, TrainingSpec
from protocol.config.run_state import load_dataset
from protocol.core.aggregation.state import decode_all
from protocol.core.crypto.hashing import Digest
from protocol.core.crypto.keccak import checksum_address
from protocol.core.pipeline.round_pipelines import pipeline_account
from protocol.core.pipeline.stage_envelope import decode_stage_envelope
from protocol.core.pipeline.stage_pay import present_stage_scores, stage_flops_per_token
from protocol.core.pipeline.staged_bundle import decode_model
from protocol.core.train.compress import compress, encode_update
from protocol.core.train.training import RoundTask
from validator.scoring import RoundEntry, score_round


@dataclass(frozen=True)
class StagedEntry:
    miner: str
    column: int
    envelope: bytes | None  # None: committed nothing, or nothing usable was served
    passed: bool  # its check held (False: evidence against it)


@dataclass(frozen=True)
class PipelineEntries:
    members: tuple[str, ...]  # the round's formation, stage 0 first
    stages: tuple[StagedEntry | None, ...]  # per stage (None: that stage did not commit)


@dataclass(frozen=True)
class StageScoreJob:
    spec: TrainingSpec
    run_seed: bytes
    round: int
    state_blob: bytes
    state_hash: bytes
    pipelines: list[PipelineEntries]
    validator_seed: bytes
    max_bytes: int


def scored_stage_miners(job: StageScoreJob) -> dict[str, tuple[int, str]]:
    """Each committed stage miner's score and why it is what it is ("" for a positive score)."""
    setup = Setup(job.spec, job.run_seed)
    state = decode_model(job.state_blob, setup.model, setup.stage_split, job.state_hash)
    out: dict[str, tuple[int, str]] = {}
    entries: list[RoundEntry] = []
    kept: list[PipelineEntries] = []
    for p in job.pipelines:
        present = [e for e in p.stages if e is not None]
        if not present:  # nobody of it committed: nothing to score
            continue
        if any(not e.passed or e.envelope is None for e in present):
            out |= {e.miner: (0, "a stage of its pipeline failed its check") for e in present}
            continue
        task = RoundTask(job.run_seed, job.round, pipeline_account(p.members), setup.model,
                         setup.compute.with_steps(_steps(setup, present)))
        entries.append(RoundEntry(task, min(e.column for e in present), _combined(setup, p.stages, job.max_bytes), True))
        kept.append(p)
    scores = score_round(entries, load_dataset(job.spec.dataset), state.params, Digest(job.validator_seed),
                         device=setup.profile.device, step_norm=state.step_norm)
    for entry, p in zip(entries, kept, strict=True):
        s = scores[entry.task.miner]
        why = s.zero_reason.value if s.zero_reason is not None else ("" if s.score > 0 else "no held-out gain")
        out |= _split(setup, p.stages, s.score, why)
    return {checksum_address(m): v for m, v in out.items()}


def _steps(setup: Setup, present: Sequence[StagedEntry]) -> int:
    """The steps every committed stage finished (the pipeline's committed steps)."""
    envs = [decode_stage_envelope(e.envelope, 1 << 40) for e in present if e.envelope is not None]
    return min(env.trace.segments for env in envs) * setup.compute.checkpoint_every


def _combined(setup: Setup, stages: Sequence[StagedEntry | None], max_bytes: int) -> bytes:
    split, cfg = setup.stage_split, setup.compute
    assert split is not None
    sizes = split.sizes(setup.model)
    parts = []
    for s, entry in enumerate(stages):
        if entry is None or entry.envelope is None:
            parts.append(torch.zeros(sizes[s]))
            continue
        dense, _ = decode_all([decode_stage_envelope(entry.envelope, max_bytes).update], setup.model, cfg, sizes[s])
        parts.append(dense[0])
    return encode_update(compress(torch.cat(parts), cfg.chunk, cfg.topk, cfg.bits))


def _split(setup: Setup, stages: Sequence[StagedEntry | None], score: int, why: str) -> dict[str, tuple[int, str]]:
    """Each committed stage's share by its work over every stage of the pipeline: a stage that
    committed nothing (silent, killed) loses its own share, and only its own."""
    split = setup.stage_split
    assert split is not None
    work = [stage_flops_per_token(setup.model, split, s) for s in range(len(stages))]  # equal steps in one pipeline
    shares = present_stage_scores(score, work, [e is not None for e in stages])
    return {e.miner: (share, why if share == 0 else "") for e, share in zip(stages, shares, strict=True)
            if e is not None}
