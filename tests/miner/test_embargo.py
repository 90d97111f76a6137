"""Rule 9 in the miner: its round's work is embargoed when kept and served once the chain
says the commit phase closed (also after a restart that left an embargo behind)."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest
import trio
from fixtures_training import checkpoint_file  # loaded by tests/conftest.py

from miner.node import MinerNode
from miner.work import MinerOutput
from protocol.chain.client import Phase
from protocol.core.crypto.hashing import content_hash
from protocol.node.store import DataDir, write_blob

ROOT = b"\x07" * 32


class Phases:
    """`ChainPort.phase` as the chain would answer it; tests move it by hand."""

    def __init__(self, **rounds: Phase) -> None:
        self.of = {int(k[1:]): v for k, v in rounds.items()}

    async def phase(self, round_: int) -> Phase:
        await trio.lowlevel.checkpoint()
        return self.of[round_]


def _miner(tmp_path, phases: Phases) -> tuple[SimpleNamespace, MinerOutput]:
    data = DataDir(tmp_path)
    ckpts = [write_blob(data.blobs.root, checkpoint_file(b"leaf-%d" % i * 100)) for i in range(3)]  # as the worker does
    out = MinerOutput(b"envelope", ROOT, [*ckpts[:2], None], [b"p0", b"p1", b"p2"], [2], b"carry", 30, 1.0)
    node = SimpleNamespace(data=data, port=phases, log=logging.getLogger("test"))
    return node, out


def _served(node: SimpleNamespace, out: MinerOutput) -> list[bool]:
    d = node.data
    return [d.get(content_hash(out.envelope)) is not None, d.get(content_hash(out.carry)) is not None,
            d.get_checkpoint(5, ROOT, 0) is not None, d.get_checkpoint(5, ROOT, 1) is not None]


@pytest.mark.trio
async def test_kept_work_is_not_served_while_the_commit_phase_is_open(tmp_path):
    phases = Phases(r5=Phase.COMMIT)
    node, out = _miner(tmp_path, phases)
    work = MinerNode._keep(node, 5, out)  # type: ignore[arg-type]
    assert work["update_hash"] == content_hash(b"envelope").hex()
    await MinerNode._lift_embargoes(node)  # type: ignore[arg-type]
    assert _served(node, out) == [False, False, False, False]
    assert node.data.get(out.checkpoints[0]) is None  # nor a checkpoint by its content hash


@pytest.mark.trio
async def test_work_is_served_once_the_chain_says_the_phase_closed(tmp_path):
    phases = Phases(r5=Phase.COMMIT)
    node, out = _miner(tmp_path, phases)
    MinerNode._keep(node, 5, out)  # type: ignore[arg-type]
    phases.of[5] = Phase.SCORING
    await MinerNode._lift_embargoes(node)  # type: ignore[arg-type]
    assert _served(node, out) == [True, True, True, True]


@pytest.mark.trio
async def test_a_restart_keeps_the_embargo_until_the_close(tmp_path):
    phases = Phases(r5=Phase.COMMIT)
    node, out = _miner(tmp_path, phases)
    MinerNode._keep(node, 5, out)  # type: ignore[arg-type]
    node.data.state.close()
    node.data = DataDir(tmp_path)  # the node restarts on the same data dir
    await MinerNode._lift_embargoes(node)  # type: ignore[arg-type]
    assert _served(node, out) == [False, False, False, False]
    phases.of[5] = Phase.ENDED  # it came back after the round moved on
    await MinerNode._lift_embargoes(node)  # type: ignore[arg-type]
    assert _served(node, out) == [True, True, True, True]
