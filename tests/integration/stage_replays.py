"""What a validator of a stage's class runs on a served stage (module-level: it runs in a
profile worker, which imports this module): every segment of a committed stage envelope replayed
from its served bundles and the pipeline's batches."""

from __future__ import annotations

from collections.abc import Sequence

from protocol.config.run_setup import Setup, TrainingSpec
from protocol.core.pipeline.segment_bundle import decode_segment
from protocol.core.pipeline.stage_envelope import decode_stage_envelope
from protocol.core.pipeline.stage_replay import StageReplayStatus, StageTask, replay_stage_segment
from protocol.node.pipeline_batches import pipeline_batches

ENVELOPE_CAP = 1 << 24


def replay_all(spec: TrainingSpec, run_seed: bytes, members: Sequence[str], envelope: bytes,
               bundles: Sequence[bytes]) -> list[StageReplayStatus]:
    """Each segment's replay status, the pipeline's batches those of `members[0]`'s pages."""
    setup = Setup(spec, run_seed)
    env = decode_stage_envelope(envelope, ENVELOPE_CAP)
    seat, split, cfg, count = env.seat, setup.stage_split, setup.compute, spec.microbatches
    assert split is not None
    task = StageTask(setup.model, split, cfg, count, seat)
    data, k = pipeline_batches(setup, seat.round, members), cfg.checkpoint_every
    rows = cfg.batch_size // count
    out = []
    for j, blob in enumerate(bundles):
        served = decode_segment(blob, setup.model, split, seat, k, count, rows, j * k).segment
        out.append(replay_stage_segment(task, env.trace, j, served, data[j * k:(j + 1) * k]).status)
    return out
