"""A staged run's global state: one content-addressed blob per stage, and the model hash as the
Merkle root over them (docs/PROTOCOL.md §16.2).

Without stages the model hash is `global_state_hash`, blake3 of the whole state's bytes, as ever.
With S stages, stage s's slice of the state (its parameters by name, its values of the outer
momentum in the whole model's order, the norm per step) is encoded as a whole state is, with the
metadata `config hash:stage s/S`; its hash is blake3 of those bytes, and the model hash is
`merkle_root` over the S stage hashes in stage order. A stage miner fetches only its stage's blob
by its hash and checks that hash against the attested model hash with the S stage hashes
(`check_stage_hashes`: S x 32 bytes), so nobody downloads a stage it does not train.
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
    global_state_hash,
    state_metadata,
)
from protocol.core.crypto.hashing import Digest, content_hash, merkle_root
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


def staged_model_hash(stage_hashes: Sequence[bytes]) -> Digest:
    return merkle_root(list(stage_hashes))


def model_hash(s: GlobalState, model: ModelConfig, split: StageSplit | None) -> Digest:
    """The model hash attested on chain: the whole state's hash, or the root over its stages'."""
    if split is None:
        return global_state_hash(s, model)
    return staged_model_hash([h for _, h in encoded_stages(s, model, split)])


def check_stage_hashes(attested: bytes, stage_hashes: Sequence[bytes], split: StageSplit) -> None:
    """Raise StateFormatError unless `stage_hashes` are the split's S hashes under `attested`."""
    if len(stage_hashes) != split.count or staged_model_hash(stage_hashes) != attested:
        raise StateFormatError(f"the {len(stage_hashes)} stage hashes served are not the {split.count} "
                               f"stages of the attested model hash")


def decode_stage(blob: bytes, model: ModelConfig, split: StageSplit, stage: int, expected_hash: bytes) -> GlobalState:
    """Stage `stage`'s served bytes, checked against its hash (checked in turn with
    `check_stage_hashes`), its parameters' shapes and its metadata."""
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
