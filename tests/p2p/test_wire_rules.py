"""Rules 9 and 10 over real hosts on 127.0.0.1 and the real blob protocol.

Rule 10: a requester checks every served checkpoint's Merkle proof against the committed
trace root; a peer whose proof fails did not serve it (the next peer is asked).
Rule 9: a node serves nothing of a round's own work before that round's commit phase closes.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import fixtures_training as ft  # loaded by tests/conftest.py
import pytest
import trio

from protocol.config.run_setup import Setup, TrainingSpec
from protocol.core.crypto.hashing import content_hash
from protocol.core.proof.envelope import encode_proof
from protocol.core.proof.submission import Submission, honest
from protocol.core.proof.trace import ProofMismatch, check_served_leaf, leaf_proof
from protocol.core.wire.blob_caps import blob_caps
from protocol.node.node_config import NodeConfig
from protocol.node.store import DataDir
from protocol.p2p import DirectoryBlobSource, MemoryCheckpointSource, P2PNode, RegistryView
from protocol.p2p.errors import BlobNotFound
from validator.checks import fetch_leaf

from .conftest import CHAIN_ID, CONTRACT, RoundClock, entry_for, identity, p2p_config

ROUND = 5


TASK = ft.task(0, round_=ROUND)
# the run TASK belongs to, as a node resolves it from the run config
SETUP = Setup(TrainingSpec(preset="micro", compute={"inner_steps": 6, "checkpoint_every": 2, "batch_size": 4,
                                                    "pages_per_miner": 4}), ft.RUN_SEED)
assert (SETUP.model, SETUP.compute) == (TASK.model, TASK.cfg)


@pytest.fixture(scope="module")
def sub() -> Submission:
    ft.apply_test_profile()
    return honest(TASK, ft.corpus(), ft.theta0(), None)


def served(sub: Submission, leaf: int) -> tuple[bytes, bytes]:
    blob = sub.fetch(leaf, TASK)
    p = leaf_proof(sub.trace, leaf)
    assert blob is not None
    return blob, encode_proof(p.index, p.size, list(p.siblings))


@asynccontextmanager
async def hosts(sources: list[tuple[Any, Any]]) -> AsyncIterator[list[P2PNode]]:
    """One running node per (blob source, checkpoint source), all registered and dialled."""
    regs = [RegistryView(CHAIN_ID, CONTRACT) for _ in sources]
    clock = RoundClock(ROUND)
    nodes = [P2PNode(identity(i), p2p_config(), regs[i], blobs, ckpts, current_round=clock)
             for i, (blobs, ckpts) in enumerate(sources)]
    async with AsyncExitStack() as stack:
        for node in nodes:
            await stack.enter_async_context(node.run())
        for reg in regs:
            for i, node in enumerate(nodes):
                reg.upsert(entry_for(i, node.listen_addr))
        yield nodes


def memory(tmp_path: Path, name: str) -> tuple[DirectoryBlobSource, MemoryCheckpointSource]:
    return DirectoryBlobSource(tmp_path / name), MemoryCheckpointSource()


def honest_miner(tmp_path: Path, sub: Submission) -> tuple[DirectoryBlobSource, MemoryCheckpointSource]:
    """A miner's sources serving every checkpoint of `sub` with its proof."""
    miner = memory(tmp_path, "miner")
    for leaf in range(len(sub.checkpoints)):
        miner[1].add(ROUND, sub.root, leaf, *served(sub, leaf))
    return miner


def validator_ctx(node: P2PNode, data: DataDir) -> Any:
    """What `fetch_leaf` uses of a NodeContext: the p2p node, the data dir it fetches into, the
    fetch timeout, the setup, the caps."""
    return SimpleNamespace(p2p=node, data=data, config=NodeConfig(data_dir=data.root, fetch_timeout_s=10.0),
                           setup=SETUP, log=logging.getLogger("test"),
                           caps=blob_caps(TASK.model, TASK.cfg))


# ---- rule 10 ---------------------------------------------------------------------------


@pytest.mark.trio
async def test_honest_checkpoints_verify_after_the_real_protocol(tmp_path, sub):
    with trio.fail_after(60):
        miner = honest_miner(tmp_path, sub)
        async with hosts([memory(tmp_path, "validator"), miner]) as (validator, m):
            key = m.identity.public_key
            for leaf in range(len(sub.checkpoints)):
                got = await validator.fetch_checkpoint(key, ROUND, sub.root, leaf)
                check_served_leaf(got.data, got.proof, sub.root, leaf, TASK.model, TASK.cfg)
                fetched = await fetch_leaf(validator_ctx(validator, DataDir(tmp_path / "vdata")), ROUND, sub.root,
                                           leaf, [key])
                assert fetched is not None and fetched.path.read_bytes() == served(sub, leaf)[0]


@pytest.mark.trio
async def test_a_forged_proof_is_not_served_and_the_next_peer_is_asked(tmp_path, sub):
    with trio.fail_after(60):
        blob1, proof1 = served(sub, 1)
        blob2, proof2 = served(sub, 2)
        p = leaf_proof(sub.trace, 1)
        forger, misplacer, honest_peer = memory(tmp_path, "f"), memory(tmp_path, "m"), memory(tmp_path, "h")
        forger[1].add(ROUND, sub.root, 1, blob1, encode_proof(1, p.size, [bytes(32), *p.siblings[1:]]))
        misplacer[1].add(ROUND, sub.root, 1, blob2, proof2)  # another leaf's valid checkpoint and proof
        honest_peer[1].add(ROUND, sub.root, 1, blob1, proof1)
        async with hosts([memory(tmp_path, "v"), forger, misplacer, honest_peer]) as nodes:
            validator, f, m, h = nodes
            ctx = validator_ctx(validator, DataDir(tmp_path / "vdata"))
            keys = [f.identity.public_key, m.identity.public_key]
            for key in keys:  # each is served over the wire (valid blob, hash checked) ...
                got = await validator.fetch_checkpoint(key, ROUND, sub.root, 1)
                assert got.blob_hash == content_hash(got.data)
                with pytest.raises(ProofMismatch):  # ... and its proof fails
                    check_served_leaf(got.data, got.proof, sub.root, 1, TASK.model, TASK.cfg)
            assert await fetch_leaf(ctx, ROUND, sub.root, 1, keys) is None  # reported unavailable
            leaf1 = await fetch_leaf(ctx, ROUND, sub.root, 1, [*keys, h.identity.public_key])
            assert leaf1 is not None and leaf1.path.read_bytes() == blob1 and leaf1.proof == proof1
            assert not list((tmp_path / "vdata" / "blobs").glob(".partial-*"))  # rejected downloads deleted


# ---- rule 9 ----------------------------------------------------------------------------


def miner_store(tmp_path: Path, sub: Submission) -> tuple[DataDir, bytes, bytes]:
    """A miner's data dir holding its round's envelope and leaf 1, embargoed as `_keep` does."""
    d = DataDir(tmp_path / "miner")
    envelope = b"the submission envelope" * 100
    blob1, proof1 = served(sub, 1)
    d.state.embargo(ROUND, [content_hash(envelope), content_hash(blob1)])
    update_hash = d.blobs.put(envelope)
    d.add_checkpoint(ROUND, sub.root, 1, blob1, proof1)
    return d, update_hash, content_hash(blob1)


@pytest.mark.trio
async def test_nothing_of_a_round_is_served_before_its_commit_phase_closes(tmp_path, sub):
    with trio.fail_after(60):
        d, update_hash, ckpt_hash = miner_store(tmp_path, sub)
        async with hosts([memory(tmp_path, "copier"), (d, d)]) as (copier, miner):
            key = miner.identity.public_key
            for h in (update_hash, ckpt_hash):
                with pytest.raises(BlobNotFound):
                    await copier.fetch_blob(key, h)
            with pytest.raises(BlobNotFound):
                await copier.fetch_checkpoint(key, ROUND, sub.root, 1)
            assert miner.server.refusals.get("NOT_FOUND") == 3


@pytest.mark.trio
async def test_after_the_close_the_same_requests_succeed(tmp_path, sub):
    with trio.fail_after(60):
        d, update_hash, ckpt_hash = miner_store(tmp_path, sub)
        async with hosts([memory(tmp_path, "validator"), (d, d)]) as (validator, miner):
            key = miner.identity.public_key
            with pytest.raises(BlobNotFound):
                await validator.fetch_blob(key, update_hash)
            d.state.release(ROUND)  # the miner saw the commit phase close
            got = await validator.fetch_blob(key, update_hash)
            assert content_hash(got if isinstance(got, bytes) else Path(got).read_bytes()) == update_hash
            ckpt = await validator.fetch_checkpoint(key, ROUND, sub.root, 1)
            check_served_leaf(ckpt.data, ckpt.proof, sub.root, 1, TASK.model, TASK.cfg)


@pytest.mark.trio
async def test_a_restarted_miner_still_withholds_an_open_round(tmp_path, sub):
    with trio.fail_after(60):
        d, update_hash, _ = miner_store(tmp_path, sub)
        d.state.close()
        restarted = DataDir(tmp_path / "miner")
        async with hosts([memory(tmp_path, "copier"), (restarted, restarted)]) as (copier, miner):
            with pytest.raises(BlobNotFound):
                await copier.fetch_blob(miner.identity.public_key, update_hash)
