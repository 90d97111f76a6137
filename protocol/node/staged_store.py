"""A staged run's global state on disk and from peers (docs/PROTOCOL.md §16.2): the stage index
and each stage's blob are separate content-addressed blobs, so peers serve the index by the model
hash and each stage by its own hash, and a stage miner fetches its stage alone. A node that needs
the whole model reads or fetches every stage and hands its worker the bundle
(`pipeline/staged_bundle.py`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from protocol.core.aggregation.state import StateFormatError
from protocol.core.pipeline.stage_split import StageSplit
from protocol.core.pipeline.staged_bundle import open_bundle, pack_bundle
from protocol.core.pipeline.staged_state import read_stage_index
from protocol.core.wire.blob_caps import BlobKind
from protocol.node.store import BlobStore

# fetch(hash, kind) -> the verified blob, or None: `PeerBlobs.fetch_blob`
Fetch = Callable[[bytes, BlobKind], Awaitable[bytes | None]]


def keep_bundle(blobs: BlobStore, bundle: bytes, split: StageSplit, model_hash: bytes) -> None:
    """Store a checked bundle as its index (addressed by the model hash) and its stage blobs."""
    index, stages = open_bundle(bundle, split, model_hash)
    for blob in stages:
        blobs.put(blob)
    blobs.put(index)  # last: a held index means every stage it names is held


def held_stage_hashes(blobs: BlobStore, model_hash: bytes, split: StageSplit) -> list[bytes] | None:
    """The stage hashes of a held index, or None when the index is not held."""
    if not blobs.has(model_hash):
        return None
    return read_stage_index(blobs.read(model_hash), split)


def holds_bundle(blobs: BlobStore, model_hash: bytes, split: StageSplit) -> bool:
    hashes = held_stage_hashes(blobs, model_hash, split)
    return hashes is not None and all(blobs.has(h) for h in hashes)


def held_bundle(blobs: BlobStore, model_hash: bytes, split: StageSplit) -> bytes | None:
    hashes = held_stage_hashes(blobs, model_hash, split)
    if hashes is None or not all(blobs.has(h) for h in hashes):
        return None
    return pack_bundle(hashes, [blobs.read(h) for h in hashes])  # each read re-verifies its hash


async def fetch_stage_hashes(fetch: Fetch, model_hash: bytes, split: StageSplit) -> list[bytes] | None:
    """The attested stage index from the store or peers (checked by its hash), read."""
    index = await fetch(model_hash, BlobKind.STATE)
    if index is None:
        return None
    try:
        return read_stage_index(index, split)
    except StateFormatError:  # the chain attested bytes that are no index: nothing to train on
        return None


async def fetch_bundle(fetch: Fetch, model_hash: bytes, split: StageSplit) -> bytes | None:
    """Every stage of the attested model, from the store or peers, as one bundle."""
    hashes = await fetch_stage_hashes(fetch, model_hash, split)
    if hashes is None:
        return None
    stages = []
    for h in hashes:
        blob = await fetch(h, BlobKind.STATE)
        if blob is None:
            return None
        stages.append(blob)
    return pack_bundle(hashes, stages)
