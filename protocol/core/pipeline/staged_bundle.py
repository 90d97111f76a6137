"""A staged run's state in one piece (docs/PROTOCOL.md §16.2): its stage index followed by each
stage's blob, length-prefixed. What a node that holds the whole model passes to its worker as
"the state blob" of a staged run, checked against the attested model hash (the index's hash) and
each stage against the hash its index names; on disk and on the wire the index and the stage
blobs are separate content-addressed blobs (`protocol/node/staged_store.py`).

`encoded_model` and `decode_model` are the one entry point for both kinds of run: the whole
state's bytes and hash without stages, the bundle and the index's hash with them.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from protocol.core.aggregation.state import (
    GlobalState,
    StateFormatError,
    decode_state,
    encoded_state,
)
from protocol.core.crypto.hashing import content_hash
from protocol.core.model.gpt import ModelConfig
from protocol.core.pipeline.stage_split import StageSplit
from protocol.core.pipeline.staged_state import (
    STAGE_INDEX_MAGIC,
    decode_stage,
    encode_stage,
    join_stages,
    read_stage_index,
    stage_index,
    stage_part,
)

LENGTH = struct.Struct(">Q")


def pack_bundle(stage_hashes: Sequence[bytes], blobs: Sequence[bytes]) -> bytes:
    """The bundle of stage blobs already known to hash to `stage_hashes` (read from a store or
    fetched, each checked there): nothing is hashed again until the worker opens it."""
    return stage_index(stage_hashes) + b"".join(LENGTH.pack(len(b)) + b for b in blobs)


def bundle_stages(blobs: Sequence[bytes]) -> tuple[bytes, bytes]:
    """(bundle, model hash) of the stage blobs in stage order."""
    hashes = [bytes(content_hash(b)) for b in blobs]
    return pack_bundle(hashes, blobs), bytes(content_hash(stage_index(hashes)))


def open_bundle(bundle: bytes, split: StageSplit, model_hash: bytes) -> tuple[bytes, list[bytes]]:
    """(index, stage blobs) of a bundle whose index hashes to `model_hash` and whose every
    stage blob hashes to the hash its index names."""
    index = bundle[:len(STAGE_INDEX_MAGIC) + 32 * split.count]
    if content_hash(index) != model_hash:
        raise StateFormatError("the staged state's index does not hash to the attested model hash")
    hashes, blobs, at = read_stage_index(index, split), [], len(index)
    for want in hashes:
        if at + LENGTH.size > len(bundle):
            raise StateFormatError("the staged state ends before its last stage")
        (size,), at = LENGTH.unpack_from(bundle, at), at + LENGTH.size
        blob, at = bundle[at:at + size], at + size
        if len(blob) != size or content_hash(blob) != want:
            raise StateFormatError("a stage of the staged state does not hash to the hash its index names")
        blobs.append(blob)
    if at != len(bundle):
        raise StateFormatError("the staged state has bytes after its last stage")
    return index, blobs


def encode_parts(parts: Sequence[GlobalState], model: ModelConfig, split: StageSplit) -> tuple[bytes, bytes]:
    """(bundle, model hash) of a staged state given as its slices (each with its own norm per step)."""
    if len(parts) != split.count:
        raise StateFormatError(f"{len(parts)} stage slices for {split.count} stages")
    return bundle_stages([encode_stage(part, model, split, s) for s, part in enumerate(parts)])


def decode_parts(bundle: bytes, model: ModelConfig, split: StageSplit, model_hash: bytes) -> list[GlobalState]:
    _, blobs = open_bundle(bundle, split, model_hash)
    return [decode_stage(b, model, split, s, content_hash(b)) for s, b in enumerate(blobs)]


def encoded_model(state: GlobalState, model: ModelConfig, split: StageSplit | None) -> tuple[bytes, bytes]:
    """(what a node holds, the model hash attested on chain) of a whole state."""
    if split is None:
        blob, digest = encoded_state(state, model)
        return blob, bytes(digest)
    return encode_parts([stage_part(state, model, split, s) for s in range(split.count)], model, split)


def decode_model(blob: bytes, model: ModelConfig, split: StageSplit | None, model_hash: bytes) -> GlobalState:
    """The whole state from what a node holds, checked against the attested model hash."""
    if split is None:
        return decode_state(blob, model, model_hash)
    return join_stages(decode_parts(blob, model, split, model_hash), model, split)


def decode_one_stage(bundle: bytes, model: ModelConfig, split: StageSplit, model_hash: bytes, stage: int) -> GlobalState:
    """Stage `stage`'s slice from a bundle checked against the attested model hash."""
    blob = open_bundle(bundle, split, model_hash)[1][stage]
    return decode_stage(blob, model, split, stage, content_hash(blob))
