"""What a validator's worker runs to check one stage miner (docs/PROTOCOL.md §16.5): the stage's
start is θ_r's slice, and every challenged segment, from its served bundle, replays exactly with
every received tensor signed by its sender. The verdict uses the whole-model kinds:

    DERIVATION   the trace's first state is not θ_r's stage slice (fresh moments, step 0)
    UNAVAILABLE  a challenged segment's bundle not served, malformed, or not the committed data
    REPLAY       a sent tensor or the end state differs, or a received hash its sender never signed
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from protocol.config.run_setup import Setup, TrainingSpec
from protocol.core.checkpoint.header import BlobFormatError
from protocol.core.model.gpt import Params, load_params
from protocol.core.pipeline.attribution import Domain
from protocol.core.pipeline.gpipe import fresh_state
from protocol.core.pipeline.received_signatures import (
    NeighbourSegment,
    contradicted_sends,
    misreported_slots,
)
from protocol.core.pipeline.segment_bundle import ServedBundle, decode_segment
from protocol.core.pipeline.stage_checkpoint import capture, stage_state_hash
from protocol.core.pipeline.stage_envelope import StageEnvelope, decode_stage_envelope
from protocol.core.pipeline.stage_module import StageModule
from protocol.core.pipeline.stage_replay import (
    ServedDataMismatch,
    StageReplayResult,
    StageReplayStatus,
    StageTask,
    replay_stage_segment,
)
from protocol.core.pipeline.stage_slots import StageSeat
from protocol.core.pipeline.stage_update import stage_update
from protocol.core.pipeline.staged_bundle import decode_one_stage
from protocol.core.settlement.fraud import FraudKind
from protocol.node.pipeline_batches import pipeline_batches
from validator.work import AuditReplay, CheckOutcome


@dataclass(frozen=True)
class StageCheckJob:
    spec: TrainingSpec
    run_seed: bytes
    miner: str
    members: tuple[str, ...]  # its pipeline's miners, stage 0 first
    member_keys: tuple[bytes, ...]  # their node keys (who signs what the stage received)
    domain: Domain
    state_blob: bytes  # θ_r: its stages' bundle (`pipeline/staged_bundle.py`)
    state_hash: bytes
    envelope: bytes  # fetched, decoded and bound to the commit already (`stage_checks.fetch_stage_submission`)
    max_bytes: int
    # challenged segment -> its served bundle (None: not served), in the challenge's order, then the
    # last segment's if it was not challenged: its replay's end state must give the committed update
    bundles: Mapping[int, bytes | None]
    challenged: tuple[int, ...] = ()
    # challenged segment -> the same segment as stage - 1 and stage + 1 served it (None: no such
    # neighbour, or nothing served): the signatures they hold of what this stage sent them
    neighbour_bundles: Mapping[int, tuple[bytes | None, bytes | None]] = field(default_factory=dict)


def check_stage_miner(job: StageCheckJob) -> CheckOutcome:
    setup = Setup(job.spec, job.run_seed)
    env = decode_stage_envelope(job.envelope, job.max_bytes)
    start, start_params = _start(setup, env, job.state_blob, job.state_hash)
    if start != env.trace.checkpoint_hashes[0]:
        return _fails(job, FraudKind.DERIVATION, None, "the stage's first state is not θ_r's slice", 0,
                      env.trace.checkpoint_hashes[0], start)
    data = pipeline_batches(setup, env.seat.round, job.members)
    inner, end = [], None
    for j, blob in job.bundles.items():  # in the challenge's order: the witness covers them so
        outcome = _segment(job, setup, env, j, blob, data)
        if isinstance(outcome, CheckOutcome) and job.challenged and j not in job.challenged:
            # the last segment, replayed for the update alone: a fault there is one of derivation, and
            # the report names a challenged segment (voters replay the last one with it)
            kind = FraudKind.UNAVAILABLE if outcome.kind is FraudKind.UNAVAILABLE else FraudKind.DERIVATION
            return replace(outcome, kind=kind, segment=None, leaf=None)
        if isinstance(outcome, CheckOutcome):
            return outcome
        if j in job.challenged or not job.challenged:
            inner.append(tuple(bytes(h) for h in outcome.inner_hashes))
        if j == env.trace.segments - 1:
            end = outcome.end_params
    if end is not None and stage_update(start_params, end, setup.compute) != env.update:
        return _fails(job, FraudKind.DERIVATION, None, "the committed update does not follow from the stage's last state")
    return CheckOutcome(job.miner, None, None, None, "every challenged segment replays exactly", None, None,
                        tuple(inner))


def _start(setup: Setup, env: StageEnvelope, state_blob: bytes, state_hash: bytes) -> tuple[bytes, Params]:
    """The stage's start state as θ_r gives it: its hash (leaf 0) and its parameters."""
    split = setup.stage_split
    assert split is not None
    part = decode_one_stage(state_blob, setup.model, split, state_hash, env.seat.stage)
    module = StageModule(setup.model, split, env.seat.stage)
    load_params(module, part.params)
    start = capture(module, fresh_state(module), 0)
    return bytes(stage_state_hash(start, setup.model)), start.params


def _segment(job: StageCheckJob, setup: Setup, env: StageEnvelope, j: int, blob: bytes | None,
             data: Sequence) -> CheckOutcome | StageReplayResult:
    """The segment's failed verdict, or its exact replay."""
    seat, k = env.seat, setup.compute.checkpoint_every
    if blob is None:
        return _fails(job, FraudKind.UNAVAILABLE, j, f"segment {j} not served")
    try:
        bundle, result = _replayed(setup, env, j, blob, data, job.spec.microbatches)
    except (BlobFormatError, ServedDataMismatch) as exc:
        return _fails(job, FraudKind.UNAVAILABLE, j, f"segment {j}: {exc}")
    if result.status is not StageReplayStatus.EXACT:
        d = result.divergence
        assert d is not None
        return _fails(job, FraudKind.REPLAY, j, f"segment {j}: {d.what.value} differs at step {d.step}",
                      j, d.committed, d.replayed)
    keys = job.member_keys
    neighbours = (keys[seat.stage - 1] if seat.stage > 0 else None,
                  keys[seat.stage + 1] if seat.stage + 1 < seat.stages else None)
    lies = misreported_slots(seat, j * k + 1, bundle.segment.hashes, bundle.signatures, neighbours, job.domain)
    if lies:
        return _fails(job, FraudKind.REPLAY, j, f"segment {j}: {len(lies)} received hashes its sender never signed")
    sends = contradicted_sends(seat, j * k + 1, bundle.segment.hashes, keys[seat.stage],
                               _neighbour_segments(job, setup, seat, j), job.domain)
    if sends:
        return _fails(job, FraudKind.REPLAY, j, f"segment {j}: signed {len(sends)} tensors it did not commit as sent, "
                                                f"first at step {sends[0].step}")
    return result


def _replayed(setup: Setup, env: StageEnvelope, j: int, blob: bytes, data: Sequence,
              count: int) -> tuple[ServedBundle, StageReplayResult]:
    """Segment j of the stage's served bundle, decoded and replayed against its committed trace;
    BlobFormatError or ServedDataMismatch when it is not what the stage committed."""
    split, cfg, seat = setup.stage_split, setup.compute, env.seat
    assert split is not None
    k = cfg.checkpoint_every
    bundle = decode_segment(blob, setup.model, split, seat, k, count, cfg.batch_size // count, j * k)
    task = StageTask(setup.model, split, cfg, count, seat)
    return bundle, replay_stage_segment(task, env.trace, j, bundle.segment, data[j * k:(j + 1) * k])


def _neighbour_segments(job: StageCheckJob, setup: Setup, seat: StageSeat,
                        j: int) -> tuple[NeighbourSegment | None, NeighbourSegment | None]:
    """Segment j as stage - 1 and stage + 1 served it; a neighbour's malformed bundle is its own
    fault (its own check names it) and shows nothing about this stage."""
    split, cfg, count = setup.stage_split, setup.compute, job.spec.microbatches
    assert split is not None
    k = cfg.checkpoint_every

    def read(blob: bytes | None, stage: int) -> NeighbourSegment | None:
        if blob is None:
            return None
        try:
            served = decode_segment(blob, setup.model, split, replace(seat, stage=stage), k, count,
                                    cfg.batch_size // count, j * k)
        except (BlobFormatError, ServedDataMismatch):
            return None
        return NeighbourSegment(served.segment.hashes, served.signatures)

    below, above = job.neighbour_bundles.get(j, (None, None))
    return read(below, seat.stage - 1), read(above, seat.stage + 1)


def _fails(job: StageCheckJob, kind: FraudKind, segment: int | None, detail: str, leaf: int | None = None,
           expected: bytes | None = None, actual: bytes | None = None) -> CheckOutcome:
    return CheckOutcome(job.miner, kind, leaf, segment, detail, None if expected is None else bytes(expected),
                        None if actual is None else bytes(actual))


@dataclass(frozen=True)
class StageAuditJob:
    """Replay the stage segments another validator claims to have replayed (validator/audits.py)."""

    spec: TrainingSpec
    run_seed: bytes
    members: tuple[str, ...]
    envelope: bytes
    max_bytes: int
    bundles: Mapping[int, bytes | None]  # in the claimed challenge's order


def replay_stage_for_audit(job: StageAuditJob) -> AuditReplay:
    setup = Setup(job.spec, job.run_seed)
    env = decode_stage_envelope(job.envelope, job.max_bytes)
    data, inner = pipeline_batches(setup, env.seat.round, job.members), []
    for j, blob in job.bundles.items():
        if blob is None:
            return AuditReplay(False, False, ())
        try:
            _, result = _replayed(setup, env, j, blob, data, job.spec.microbatches)
        except (BlobFormatError, ServedDataMismatch):
            return AuditReplay(False, False, ())
        if result.status is not StageReplayStatus.EXACT:
            return AuditReplay(True, False, ())
        inner += [bytes(h) for h in result.inner_hashes]
    return AuditReplay(True, True, tuple(inner))
