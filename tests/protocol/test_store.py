"""The data dir survives crashes: atomic blobs, durable journal, corruption detected."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from protocol.core.hashing import content_hash
from protocol.node.store import BlobStore, DataDir, NodeState, StoreError


def test_blob_round_trip_and_dedup(tmp_path):
    store = BlobStore(tmp_path)
    h = store.put(b"update bytes")
    assert h == content_hash(b"update bytes")
    assert store.put(b"update bytes") == h
    assert store.read(h) == b"update bytes"
    assert store.get(b"\x00" * 32) is None
    with pytest.raises(StoreError):
        store.read(b"\x00" * 32)


def test_corrupt_blob_is_detected(tmp_path):
    store = BlobStore(tmp_path)
    h = store.put(b"checkpoint")
    store.path_for(h).write_bytes(b"checkpoinT")
    with pytest.raises(StoreError, match="corrupt"):
        store.read(h)


def test_leftover_partials_are_swept(tmp_path):
    (tmp_path / ".partial-abc").write_bytes(b"half")
    BlobStore(tmp_path)
    assert not (tmp_path / ".partial-abc").exists()


def test_journal_survives_sigkill(tmp_path):
    script = textwrap.dedent(f"""
        import os, signal
        from protocol.node.store import DataDir
        d = DataDir({str(tmp_path)!r})
        d.state.record(3, "scores_committed", {{"salt": "ab" * 32, "scores": [1, 2]}})
        d.state.set("model_hash", "cafe")
        d.blobs.put(b"x" * 100_000)
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    proc = subprocess.run([sys.executable, "-c", script], cwd=os.getcwd())
    assert proc.returncode == -9
    d = DataDir(tmp_path)
    assert d.state.recall(3, "scores_committed") == {"salt": "ab" * 32, "scores": [1, 2]}
    assert d.state.get("model_hash") == "cafe"
    assert d.blobs.read(content_hash(b"x" * 100_000)) == b"x" * 100_000
    assert d.state.steps(3) == ["scores_committed"]


def test_unusable_state_file(tmp_path):
    bad = tmp_path / "state.sqlite"
    bad.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoreError, match="unusable"):
        NodeState(bad)


def test_checkpoints_are_served_by_round_root_and_leaf(tmp_path):
    d = DataDir(tmp_path)
    d.add_checkpoint(2, b"\x01" * 32, 3, b"ckpt-bytes", b'{"proof": 1}')
    path, proof = d.get_checkpoint(2, b"\x01" * 32, 3)
    assert path.read_bytes() == b"ckpt-bytes" and proof == b'{"proof": 1}'
    assert d.get_checkpoint(2, b"\x01" * 32, 4) is None
    assert d.get_checkpoint(3, b"\x01" * 32, 3) is None
    assert d.get(content_hash(b"ckpt-bytes")) == path


def test_dropping_a_round_frees_its_checkpoints_only(tmp_path):
    d = DataDir(tmp_path)
    d.add_checkpoint(1, b"\x01" * 32, 0, b"round-1-leaf-0" * 100, b"p")
    d.add_checkpoint(1, b"\x01" * 32, 1, b"shared-leaf" * 100, b"p")
    d.add_checkpoint(2, b"\x02" * 32, 0, b"shared-leaf" * 100, b"p")  # same bytes, still needed
    d.add_checkpoint(2, b"\x02" * 32, 1, b"round-2-leaf-1" * 100, b"p")
    assert d.state.checkpoint_rounds() == [1, 2]
    assert d.drop_checkpoints(1) == len(b"round-1-leaf-0" * 100)
    assert d.state.checkpoint_rounds() == [2]
    assert d.get_checkpoint(1, b"\x01" * 32, 0) is None and d.get_checkpoint(1, b"\x01" * 32, 1) is None
    assert not d.blobs.has(content_hash(b"round-1-leaf-0" * 100))
    path, _ = d.get_checkpoint(2, b"\x02" * 32, 0)
    assert path.read_bytes() == b"shared-leaf" * 100
    assert d.drop_checkpoints(1) == 0  # dropping twice is harmless
