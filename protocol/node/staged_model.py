"""The next global state of a staged run (docs/PROTOCOL.md §16.8), as every node computes it in
its worker: each stage's slice of θ_r moved by the kept stage envelopes of that stage, by the run's
rule, and the slices joined back into one state (held and fetched by its hash as a whole model's)."""

from __future__ import annotations

from collections.abc import Sequence

from protocol.config.run_setup import Setup, TrainingSpec
from protocol.core.aggregation.state import decode_state, encoded_state
from protocol.core.pipeline.stage_envelope import decode_stage_envelope
from protocol.core.pipeline.staged_aggregate import staged_next
from protocol.core.pipeline.staged_state import join_stages, stage_part


def next_staged_state(spec: TrainingSpec, run_seed: bytes, state_blob: bytes, state_hash: bytes,
                      envelopes: Sequence[bytes], max_bytes: int) -> tuple[bytes, bytes]:
    """(encoded next state, its hash) from the kept stage envelopes, each weighted by its steps."""
    setup = Setup(spec, run_seed)
    model, cfg, split = setup.model, setup.compute, setup.stage_split
    assert split is not None, "a staged run"
    state = decode_state(state_blob, model, state_hash)
    opened = [decode_stage_envelope(e, max_bytes) for e in envelopes]
    stages = range(split.count)
    updates = [[o.update for o in opened if o.seat.stage == s] for s in stages]
    steps = [[o.trace.segments * cfg.checkpoint_every for o in opened if o.seat.stage == s] for s in stages]
    parts = staged_next([stage_part(state, model, split, s) for s in stages], updates, steps, model, cfg)
    blob, new_hash = encoded_state(join_stages(parts, model, split), model)
    return blob, bytes(new_hash)
