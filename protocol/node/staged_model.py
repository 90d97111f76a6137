"""The next global state of a staged run (docs/PROTOCOL.md §16.8), as every node computes it in
its worker: each stage's slice of θ_r moved by the kept stage envelopes of that stage, by the run's
rule, each with its own norm per step; the new slices bundled under their stage index, whose hash
is the model hash (`pipeline/staged_bundle.py`)."""

from __future__ import annotations

from collections.abc import Sequence

from protocol.config.run_setup import Setup, TrainingSpec
from protocol.core.pipeline.stage_envelope import decode_stage_envelope
from protocol.core.pipeline.staged_aggregate import staged_next
from protocol.core.pipeline.staged_bundle import decode_parts, encode_parts


def next_staged_state(spec: TrainingSpec, run_seed: bytes, state_blob: bytes, state_hash: bytes,
                      envelopes: Sequence[bytes], max_bytes: int) -> tuple[bytes, bytes]:
    """(the next state's bundle, its model hash) from the kept stage envelopes, each weighted by its steps."""
    setup = Setup(spec, run_seed)
    model, cfg, split = setup.model, setup.compute, setup.stage_split
    assert split is not None, "a staged run"
    current = decode_parts(state_blob, model, split, state_hash)
    opened = [decode_stage_envelope(e, max_bytes) for e in envelopes]
    stages = range(split.count)
    updates = [[o.update for o in opened if o.seat.stage == s] for s in stages]
    steps = [[o.trace.segments * cfg.checkpoint_every for o in opened if o.seat.stage == s] for s in stages]
    return encode_parts(staged_next(current, updates, steps, model, cfg), model, split)
