"""A staged state on disk and from peers (PROTOCOL.md §16.2): kept as its stage index (by the model
hash) and its stage blobs, read back whole, fetched index first and then stage by stage."""

from __future__ import annotations

import pytest
import trio

from protocol.config.run_setup import Setup, TrainingSpec
from protocol.core.aggregation.state import StateFormatError
from protocol.core.crypto.hashing import content_hash
from protocol.core.pipeline.staged_bundle import decode_parts, open_bundle
from protocol.core.wire.blob_caps import BlobKind
from protocol.node.global_model import genesis_blob
from protocol.node.staged_store import (
    fetch_bundle,
    fetch_stage_hashes,
    held_bundle,
    holds_bundle,
    keep_bundle,
)
from protocol.node.store import BlobStore, DataDir

SPEC = TrainingSpec(preset="micro", stages=2, compute={"outer_momentum": 0.9})
SETUP = Setup(SPEC, b"")
SPLIT = SETUP.stage_split


def _peer(blobs: BlobStore, asked: list[bytes]):
    async def fetch(blob_hash: bytes, kind: BlobKind) -> bytes | None:
        asked.append(blob_hash)
        return blobs.read(blob_hash) if blobs.has(blob_hash) else None
    return fetch


def test_a_kept_staged_state_is_its_index_and_stages_and_reads_back_whole(tmp_path):
    bundle, model_hash = genesis_blob(SPEC)
    blobs = DataDir(tmp_path / "node").blobs
    keep_bundle(blobs, bundle, SPLIT, model_hash)
    index, stages = open_bundle(bundle, SPLIT, model_hash)
    assert blobs.read(model_hash) == index and all(blobs.read(content_hash(b)) == b for b in stages)
    assert holds_bundle(blobs, model_hash, SPLIT) and held_bundle(blobs, model_hash, SPLIT) == bundle
    assert len(decode_parts(bundle, SETUP.model, SPLIT, model_hash)) == 2
    blobs.path_for(content_hash(stages[1])).unlink()  # a stage lost: the state is not held
    assert not holds_bundle(blobs, model_hash, SPLIT) and held_bundle(blobs, model_hash, SPLIT) is None


def test_a_bundle_under_another_model_hash_is_refused_before_anything_is_stored(tmp_path):
    bundle, model_hash = genesis_blob(SPEC)
    blobs = DataDir(tmp_path / "node").blobs
    with pytest.raises(StateFormatError, match="does not hash to the attested model hash"):
        keep_bundle(blobs, bundle, SPLIT, bytes(32))
    tampered = bytearray(bundle)
    tampered[-1] ^= 1
    with pytest.raises(StateFormatError, match="does not hash to the hash its index names"):
        keep_bundle(blobs, bytes(tampered), SPLIT, model_hash)
    assert not any(blobs.root.iterdir())


def test_a_stage_is_fetched_alone_and_the_whole_state_stage_by_stage(tmp_path):
    bundle, model_hash = genesis_blob(SPEC)
    peer = DataDir(tmp_path / "peer").blobs
    keep_bundle(peer, bundle, SPLIT, model_hash)
    index, stages = open_bundle(bundle, SPLIT, model_hash)

    asked: list[bytes] = []
    hashes = trio.run(fetch_stage_hashes, _peer(peer, asked), model_hash, SPLIT)
    assert hashes == [content_hash(b) for b in stages] and asked == [model_hash]  # the index alone: 8 + 64 bytes

    asked.clear()
    assert trio.run(fetch_bundle, _peer(peer, asked), model_hash, SPLIT) == bundle
    assert asked == [model_hash, *hashes]

    peer.path_for(hashes[1]).unlink()  # a peer missing a stage gives no state
    assert trio.run(fetch_bundle, _peer(peer, []), model_hash, SPLIT) is None
    whole_state_hash = content_hash(stages[0])  # a hash that names a stage, not an index
    assert trio.run(fetch_stage_hashes, _peer(peer, []), whole_state_hash, SPLIT) is None
