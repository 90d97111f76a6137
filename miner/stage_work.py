"""What a stage miner's worker runs at either end of its round (docs/PROTOCOL.md §16.4), from the
run config and θ_r alone, so every stage of a pipeline derives the same batches and its own slice:

    open_stage_round(job)   θ_r's stage slice, the pipeline's batches → a `StageDriver` in this worker
    close_stage_round(...)  the driver's record → the committed envelope, and one served bundle per
                            whole segment, written to the node's segment folder

Between the two the node drives the round over the link (`miner/stage_round.py`, `stage_call`).
The bundles carry the senders' signatures the node's inbox kept, so a validator can tell a stage
that misreports what it received from one whose neighbour sent it (`received_signatures.py`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from miner.stage_worker import register_driver, take_driver
from protocol.config.run_setup import Setup, TrainingSpec
from protocol.core.model.gpt import load_params
from protocol.core.pipeline.boundary import Direction, Slot
from protocol.core.pipeline.gpipe import fresh_state
from protocol.core.pipeline.received_signatures import SIGNATURE_BYTES, StepSignatures
from protocol.core.pipeline.segment_bundle import ServedBundle, encode_segment
from protocol.core.pipeline.stage_driver import StageDriver
from protocol.core.pipeline.stage_envelope import encode_stage_envelope
from protocol.core.pipeline.stage_module import StageModule
from protocol.core.pipeline.stage_record import StageRecord
from protocol.core.pipeline.stage_replay import ServedSegment
from protocol.core.pipeline.stage_slots import StageSeat, StepHashes
from protocol.core.pipeline.stage_trace import stage_trace_root
from protocol.core.pipeline.stage_update import stage_update
from protocol.core.pipeline.staged_state import decode_stage
from protocol.node.pipeline_batches import pipeline_batches
from protocol.p2p.stage_segments import DirectoryStageSegments


@dataclass(frozen=True)
class StageRoundJob:
    spec: TrainingSpec
    run_seed: bytes
    seat: StageSeat
    members: tuple[str, ...]  # the pipeline's miners, stage 0 first (its data is stage 0's)
    stage_blob: bytes  # θ_r's slice for this stage (PROTOCOL.md §16.2)
    stage_hash: bytes  # as the attested stage index names it


@dataclass(frozen=True)
class StageClosing:
    chain_id: int
    contract: str  # the rounds contract (bound into the envelope)
    miner: str
    signatures: Mapping[Slot, bytes]  # every received slot's signature, as the inbox kept it
    segment_dir: str  # the node's served segments (`DirectoryStageSegments`)


NO_SIGNATURE = bytes(SIGNATURE_BYTES)  # a slot the inbox never kept (it verifies none): fails every check


@dataclass(frozen=True)
class StageWork:
    envelope: bytes  # its content hash is the committed update hash
    trace_root: bytes
    steps: int  # whole segments' steps: what the pipeline commits


def open_stage_round(job: StageRoundJob) -> tuple[int, ...]:
    """Build the stage's driver over the pipeline's batches; the boundary tensor's shape."""
    setup = Setup(job.spec, job.run_seed)
    model, cfg, split = setup.model, setup.compute, setup.stage_split
    assert split is not None, "a stage round needs a staged run"
    part = decode_stage(job.stage_blob, model, split, job.seat.stage, job.stage_hash)
    module = StageModule(model, split, job.seat.stage)
    load_params(module, part.params)
    driver = StageDriver(module, fresh_state(module), job.seat, cfg, job.spec.microbatches,
                         pipeline_batches(setup, job.seat.round, job.members))
    register_driver(job.seat, driver)
    return driver.shape


def close_stage_round(seat: StageSeat, closing: StageClosing) -> StageWork:
    """The committed envelope of the whole segments finished; their bundles written to serve."""
    driver = take_driver(seat)
    outcome = driver.outcome()
    record, cfg = outcome.record, driver.cfg
    update = stage_update(record.starts[0].params if record.starts else outcome.end.params, outcome.end.params, cfg)
    envelope = encode_stage_envelope(closing.chain_id, closing.contract, closing.miner, seat, record.trace, update)
    root = bytes(stage_trace_root(record.trace))
    folder = DirectoryStageSegments(Path(closing.segment_dir))
    for j in range(record.trace.segments):
        folder.put(seat.round, root, j, encode_segment(seat, _bundle(record, j, closing.signatures), driver.count))
    return StageWork(envelope, root, outcome.steps)


def _bundle(record: StageRecord, j: int, signatures: Mapping[Slot, bytes]) -> ServedBundle:
    steps, k, seat = record.segment(j), len(record.segment(j)), record.seat
    served = ServedSegment(record.starts[j], tuple(io.hashes for io in steps), tuple(io.received for io in steps))
    return ServedBundle(served, tuple(_step_signatures(seat, j * k + i + 1, io.hashes, signatures)
                                      for i, io in enumerate(steps)))


def _step_signatures(seat: StageSeat, step: int, hashes: StepHashes, signatures: Mapping[Slot, bytes]) -> StepSignatures:
    def group(sender: int, direction: Direction, count: int) -> tuple[bytes, ...]:
        return tuple(signatures.get(Slot(seat.round, seat.pipeline, sender, step, m, direction), NO_SIGNATURE)
                     for m in range(count))
    return StepSignatures(group(seat.stage - 1, Direction.FORWARD, len(hashes.received_inputs)),
                          group(seat.stage + 1, Direction.BACKWARD, len(hashes.received_grads)))

