"""A validator's check streams each checkpoint into its data dir and hands the worker paths,
then keeps only the evidence `kept_leaves` asks for (issue 16). Real hosts on 127.0.0.1, the
real blob protocol and a real data dir; only the worker's verdict is given, so both a passed
and a failed check can be shown on the same honest submission."""

from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import fixtures_training as ft  # loaded by tests/conftest.py
import pytest
import trio
from eth_account import Account

from protocol.core.checkpoint.format import MAX_HEADER_BYTES
from protocol.core.checkpoint.part_bytes import CheckpointPart, part_of_blob
from protocol.core.proof.commitment import Commit
from protocol.core.proof.submission import Submission, honest
from protocol.core.settlement.fraud import FraudKind
from protocol.core.wire.blob_caps import blob_caps
from protocol.node.context import NodeContext
from protocol.node.keys import NodeKeys
from protocol.node.metrics import NodeMetrics
from protocol.node.node_config import NodeConfig
from protocol.node.store import DataDir
from protocol.p2p import DirectoryBlobSource, MemoryCheckpointSource
from validator.checks import check_one, needed_leaves
from validator.work import CheckJob, CheckOutcome

from .conftest import identity
from .test_wire_rules import ROUND, SETUP, TASK, hosts, served

MINER = "0x" + "11" * 20
SEGMENT = 1  # replayed: leaves 1 and 2; leaves 0 and 3 (derivation) are fetched too


@pytest.fixture(scope="module")
def sub() -> Submission:
    ft.apply_test_profile()
    return honest(TASK, ft.corpus(), ft.theta0(), None)


def validator_ctx(node: Any, data: DataDir, miner_key: bytes, verdict: FraudKind | None,
                  jobs: list[CheckJob]) -> Any:
    """What `check_one` uses of a NodeContext; the worker reads every leaf it is handed and
    returns `verdict`."""
    ctx = SimpleNamespace(p2p=node, data=data, config=NodeConfig(data_dir=data.root, fetch_timeout_s=10.0),
                          setup=SETUP, log=logging.getLogger("test"), caps=blob_caps(TASK.model, TASK.cfg),
                          keys=NodeKeys(Account.create(), identity(0)), peers_for=lambda first: [miner_key],
                          metrics=NodeMetrics())
    ctx.compute_for = lambda c: NodeContext.compute_for(ctx, c)  # type: ignore[arg-type]
    ctx.challenge_compute = lambda c: NodeContext.challenge_compute(ctx, c)  # type: ignore[arg-type]

    async def work(fn: Any, job: CheckJob) -> CheckOutcome:
        jobs.append(job)
        assert all(isinstance(p, Path) and p.is_file() for p in job.leaves.values())  # the worker finds every file
        return CheckOutcome(job.miner, verdict, None, SEGMENT, "given", None, None)

    async def commits(r: int) -> dict[str, Commit]:
        return {}  # the miner committed nothing the round before: it carries zeros in

    ctx._work, ctx.commits = work, commits
    return ctx


async def run_check(tmp_path: Path, sub: Submission, verdict: FraudKind | None) -> tuple[CheckJob, DataDir]:
    miner = DirectoryBlobSource(tmp_path / "miner"), MemoryCheckpointSource()
    for leaf in range(len(sub.checkpoints)):
        miner[1].add(ROUND, sub.root, leaf, *served(sub, leaf))
    data = DataDir(tmp_path / "validator-data")
    jobs: list[CheckJob] = []
    async with hosts([(data, data), miner]) as (validator, m):
        ctx = validator_ctx(validator, data, m.identity.public_key, verdict, jobs)
        commit = Commit(b"\x01" * 32, sub.root, 0, 0)
        await check_one(ctx, ROUND, MINER, commit, b"\x02" * 32, (b"state", b"\x00" * 32), (SEGMENT,),
                        submission=(b"envelope", None))
    assert len(jobs) == 1
    return jobs[0], data


def part_served(sub: Submission, leaf: int) -> tuple[bytes, bytes]:
    """What the check fetches of `leaf`: the part it reads (`needed_leaves`), and the proof."""
    blob, proof = served(sub, leaf)
    part = needed_leaves((SEGMENT,), len(sub.checkpoints))[leaf]
    return part_of_blob(blob, part, MAX_HEADER_BYTES), proof


def leaf_files(data: DataDir) -> set[Path]:
    return {p for p in data.blobs.root.iterdir() if not p.name.startswith(".")}


@pytest.mark.trio
async def test_the_worker_gets_paths_and_a_passed_check_keeps_only_its_segment_ends(tmp_path, sub):
    with trio.fail_after(60):
        job, data = await run_check(tmp_path, sub, verdict=None)
    assert sorted(job.leaves) == [0, 1, 2, 3]
    assert all(isinstance(p, Path) and p.parent == data.blobs.root for p in job.leaves.values())
    held = {leaf: data.held_checkpoint(ROUND, sub.root, leaf) for leaf in job.leaves}
    assert {leaf for leaf, h in held.items() if h is not None} == {SEGMENT, SEGMENT + 1}
    for leaf in (SEGMENT, SEGMENT + 1):
        path, proof = held[leaf]  # type: ignore[misc]
        assert (path.read_bytes(), proof) == part_served(sub, leaf)
    assert held[SEGMENT][0].read_bytes() == served(sub, SEGMENT)[0]  # type: ignore[index]  # the start, whole
    assert leaf_files(data) == {job.leaves[SEGMENT], job.leaves[SEGMENT + 1]}  # the others' files are gone
    assert not job.leaves[0].exists() and not job.leaves[3].exists()  # type: ignore[union-attr]


@pytest.mark.trio
async def test_a_failed_check_keeps_every_leaf_it_fetched(tmp_path, sub):
    with trio.fail_after(60):
        job, data = await run_check(tmp_path, sub, verdict=FraudKind.REPLAY)
    for leaf in job.leaves:
        held = data.held_checkpoint(ROUND, sub.root, leaf)
        assert held is not None and (held[0].read_bytes(), held[1]) == part_served(sub, leaf)
    assert leaf_files(data) == set(job.leaves.values())


def test_each_leaf_ships_only_the_part_its_check_reads(sub):
    parts = needed_leaves((SEGMENT,), len(sub.checkpoints))
    assert parts == {0: CheckpointPart.EF, 1: CheckpointPart.ALL, 2: CheckpointPart.HASHES, 3: CheckpointPart.PARAMS}
    whole = sum(len(served(sub, leaf)[0]) for leaf in parts)
    fetched = sum(len(part_served(sub, leaf)[0]) for leaf in parts)
    assert fetched < 0.5 * whole


def test_dropping_one_entry_keeps_a_file_another_entry_refers_to(tmp_path):
    d = DataDir(tmp_path)
    d.add_checkpoint(1, b"\x01" * 32, 0, b"same leaf-0 bytes" * 50, b"p")  # one miner's leaf 0
    d.add_checkpoint(1, b"\x02" * 32, 0, b"same leaf-0 bytes" * 50, b"p")  # another's: same bytes
    shared = d.held_checkpoint(1, b"\x01" * 32, 0)
    assert shared is not None
    assert d.drop_checkpoint(1, b"\x01" * 32, 0) == 0 and shared[0].is_file()
    assert d.held_checkpoint(1, b"\x01" * 32, 0) is None
    assert d.drop_checkpoint(1, b"\x02" * 32, 0) == len(b"same leaf-0 bytes" * 50)
    assert not shared[0].exists()
    assert d.drop_checkpoint(1, b"\x02" * 32, 0) == 0  # nothing indexed: nothing to drop
