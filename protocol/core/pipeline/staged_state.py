"""A staged run's global state: one content-addressed blob per stage, and the model hash as the
hash of their index (docs/PROTOCOL.md §16.2).

Without stages the model hash is `global_state_hash`, blake3 of the whole state's bytes, as ever.
With S stages, stage s's slice of the state (its parameters by name, its values of the outer
momentum in the whole model's order, the norm per step) is encoded as a whole state is, with the
metadata `config hash:stage s/S`; its hash is blake3 of those bytes. The **stage index** is
`STAGE_INDEX_MAGIC` and the S stage hashes in stage order (8 + 32 S bytes), and the model hash is
its blake3. So the index is itself a blob addressed by the model hash: a stage miner fetches the
index (checked against the attested hash like any blob), then its stage's blob alone by the hash
the index names, and nobody downloads a stage it does not train.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from protocol.core.aggregation.state import (
    GlobalState,
    StateFormatError,
    decode_state,
    encode_state,
    state_metadata,
)
from protocol.core.crypto.hashing import Digest, content_hash
from protocol.core.model.gpt import ModelConfig, param_shapes
from protocol.core.pipeline.stage_split import StageSplit


def _spans(model: ModelConfig) -> dict[str, slice]:
    """Each parameter's span of the flat vector (the outer momentum's layout)."""
    out, at = {}, 0
    for name, shape in param_shapes(model).items():
        out[name] = slice(at, at + math.prod(shape))
        at += math.prod(shape)
    return out


def stage_part(s: GlobalState, model: ModelConfig, split: StageSplit, stage: int) -> GlobalState:
    """Stage `stage`'s slice of the whole state."""
    names = split.names[stage]
    spans = _spans(model)
    momentum = None if s.momentum is None else torch.cat([s.momentum[spans[k]] for k in names])
    return GlobalState({k: s.params[k] for k in names}, momentum, s.step_norm)


def encode_stage(part: GlobalState, model: ModelConfig, split: StageSplit, stage: int) -> bytes:
    return encode_state(part, model, state_metadata(model, (stage, split.count)))


def encoded_stages(s: GlobalState, model: ModelConfig, split: StageSplit) -> list[tuple[bytes, Digest]]:
    """(blob, hash) of every stage, in stage order: what a validator keeps and serves."""
    blobs = [encode_stage(stage_part(s, model, split, i), model, split, i) for i in range(split.count)]
    return [(b, content_hash(b)) for b in blobs]


STAGE_INDEX_MAGIC = b"VTSIDXv1"


def stage_index(stage_hashes: Sequence[bytes]) -> bytes:
    """The blob the model hash of a staged state addresses: the stage hashes in stage order."""
    if not stage_hashes or any(len(h) != 32 for h in stage_hashes):
        raise StateFormatError("a stage index holds one 32-byte hash per stage")
    return STAGE_INDEX_MAGIC + b"".join(stage_hashes)


def read_stage_index(blob: bytes, split: StageSplit) -> list[bytes]:
    """The split's S stage hashes from a stage index (its hash checked by whoever fetched it)."""
    body = blob[len(STAGE_INDEX_MAGIC):]
    if not blob.startswith(STAGE_INDEX_MAGIC) or len(body) != 32 * split.count:
        raise StateFormatError(f"not a stage index of {split.count} stages ({len(blob)} bytes)")
    return [body[i:i + 32] for i in range(0, len(body), 32)]


def decode_stage(blob: bytes, model: ModelConfig, split: StageSplit, stage: int, expected_hash: bytes) -> GlobalState:
    """Stage `stage`'s served bytes, checked against its hash (the one the stage index names), its
    parameters' shapes and its metadata."""
    return decode_state(blob, model, expected_hash, split.shapes(model, stage),
                        state_metadata(model, (stage, split.count)))


def join_stages(parts: Sequence[GlobalState], model: ModelConfig, split: StageSplit) -> GlobalState:
    """The whole state from its S stage slices (for a validator that holds the whole model). Each
    stage keeps its own norm per step (its updates' clip reference): the joined state carries
    it when every stage has the same, else none."""
    if len(parts) != split.count:
        raise StateFormatError(f"{len(parts)} stage slices for {split.count} stages")
    with_momentum = [p.momentum is not None for p in parts]
    if any(with_momentum) != all(with_momentum):
        raise StateFormatError("some stage slices carry an outer momentum and some do not")
    merged = {k: v for p in parts for k, v in p.params.items()}
    params = {k: merged[k] for k in param_shapes(model)}  # the whole model's order
    momentum = _joined_momentum(parts, model, split) if all(with_momentum) else None
    norms = {p.step_norm for p in parts}
    return GlobalState(params, momentum, norms.pop() if len(norms) == 1 else None)


def _joined_momentum(parts: Sequence[GlobalState], model: ModelConfig, split: StageSplit) -> torch.Tensor:
    spans = _spans(model)
    flat = torch.empty(max(s.stop for s in spans.values()))
    for stage, part in enumerate(parts):
        assert part.momentum is not None
        at = 0
        for name in split.names[stage]:
            n = spans[name].stop - spans[name].start
            flat[spans[name]] = part.momentum[at:at + n]
            at += n
    return flat
