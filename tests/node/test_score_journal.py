"""A validator journals its score salt and vector before sending the commitment, so a restart
reveals exactly what it committed (issue 17). Here the journal outlives a SIGKILL of the process
that wrote it, and the commitment rebuilt from what was recalled is the one first computed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from protocol.core.settlement.score_vector import score_commitment, vector_root
from protocol.node.store import NodeState

WRITER = """
import json, os, signal, sys
from protocol.node.store import NodeState
entry = json.loads(sys.argv[2])
NodeState(sys.argv[1]).record(3, "scores", entry)
os.kill(os.getpid(), signal.SIGKILL)  # killed right after journaling, before any commit is sent
"""
CHAIN_ID, SCORES, VALIDATOR = 31337, "0x" + "11" * 20, "0x" + "22" * 20


def commitment_of(entry: dict) -> bytes:
    root = vector_root(CHAIN_ID, SCORES, VALIDATOR, 3, entry["scores"], bytes.fromhex(entry["witness_root"]),
                       entry["loss"])
    return bytes(score_commitment(root, bytes.fromhex(entry["salt"])))


def test_the_journaled_scores_survive_a_kill_and_rebuild_the_same_commitment(tmp_path: Path):
    entry = {"miners": ["0x" + "33" * 20, "0x" + "44" * 20], "scores": [65535, 41234], "salt": os.urandom(32).hex(),
             "witness_root": os.urandom(32).hex(), "loss": 5_123_456}
    db = tmp_path / "state.sqlite"
    proc = subprocess.run([sys.executable, "-c", WRITER, str(db), json.dumps(entry)], cwd=Path(__file__).parents[2])
    assert proc.returncode == -signal.SIGKILL
    recalled = NodeState(db).recall(3, "scores")
    assert recalled == entry
    assert commitment_of(recalled) == commitment_of(entry)
