"""The data dir and atomic writes: crash-atomic files, fsync calls, journal, corruption."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from fixtures_training import checkpoint_file  # loaded by tests/conftest.py

from protocol.config.atomic import atomic_write
from protocol.core.crypto.hashing import content_hash
from protocol.node.store import TEMP_PREFIX, BlobStore, DataDir, NodeState, StoreError

REPO = Path(__file__).resolve().parents[2]


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


def test_committed_state_survives_a_process_sigkill(tmp_path):
    """What a SIGKILLed process had committed is there after a restart: nothing waits in a
    user-space buffer. This is not power loss: the page cache survives a killed process, so
    the fsync calls are checked separately (`test_durable_writes_call_fsync_...`)."""
    script = textwrap.dedent(f"""
        import os, signal
        from protocol.node.store import DataDir
        d = DataDir({str(tmp_path)!r})
        d.state.record(3, "scores_committed", {{"salt": "ab" * 32, "scores": [1, 2]}})
        d.state.set("model_hash", "cafe")
        d.blobs.put(b"x" * 100_000)
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    proc = subprocess.run([sys.executable, "-c", script], cwd=REPO)
    assert proc.returncode == -signal.SIGKILL
    d = DataDir(tmp_path)
    assert d.state.recall(3, "scores_committed") == {"salt": "ab" * 32, "scores": [1, 2]}
    assert d.state.get("model_hash") == "cafe"
    assert d.blobs.read(content_hash(b"x" * 100_000)) == b"x" * 100_000
    assert d.state.steps(3) == ["scores_committed"]


# A child that the kernel kills in the middle of a write: with RLIMIT_FSIZE at LIMIT, the
# write that reaches LIMIT bytes stops there and the process dies of SIGXFSZ (default
# action: terminate, no handler, no cleanup), deterministically half way through NEW.
LIMIT = 256 * 1024
NEW_EXPR = f"bytes(range(256)) * {2 * LIMIT // 256}"  # the child builds NEW (too big for argv)
NEW = bytes(range(256)) * (2 * LIMIT // 256)
OLD = b"old complete content\n" * 100
_KILLED_MID_WRITE = """
import resource, signal
from pathlib import Path
from protocol.config.atomic import atomic_write
from protocol.node.store import write_blob
signal.signal(signal.SIGXFSZ, signal.SIG_DFL)  # CPython ignores it at startup
resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, {limit}))
{call}
print("write finished", flush=True)
"""


def _run_killed_mid_write(call: str) -> subprocess.CompletedProcess[str]:
    script = _KILLED_MID_WRITE.format(limit=LIMIT, call=call)
    proc = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == -signal.SIGXFSZ, proc.stderr
    assert "write finished" not in proc.stdout
    return proc


def test_writer_killed_mid_write_leaves_the_old_file_never_a_partial_one(tmp_path):
    """atomic_write (keys, deployment files) over an existing file, killed half way: the
    final name still holds the old content; the new bytes only ever reached a temp file."""
    target = tmp_path / "deployment.json"
    target.write_bytes(OLD)
    _run_killed_mid_write(f"atomic_write(Path({str(target)!r}), {NEW_EXPR}, prefix='.tmp-')")
    assert target.read_bytes() == OLD
    partials = list(tmp_path.glob(".tmp-*"))
    assert [p.stat().st_size for p in partials] == [LIMIT]  # the kill did land mid-write


def test_blob_writer_killed_mid_write_leaves_no_blob_and_the_partial_is_swept(tmp_path):
    root = tmp_path / "blobs"
    root.mkdir()
    _run_killed_mid_write(f"write_blob(Path({str(root)!r}), {NEW_EXPR})")
    assert not (root / content_hash(NEW).hex()).exists()
    assert [p.stat().st_size for p in root.glob(TEMP_PREFIX + "*")] == [LIMIT]
    store = BlobStore(root)
    assert list(root.iterdir()) == []
    assert store.get(content_hash(NEW)) is None
    assert store.read(store.put(NEW)) == NEW  # and the next write completes normally


def test_durable_writes_call_fsync_on_the_file_before_the_rename_and_the_dir_after(
    tmp_path, monkeypatch
):
    """Checks that the write path asks for durability (fsync the complete temp file, rename
    it, fsync the folder), on a real file system. It cannot show data survives power loss."""
    events: list[tuple] = []  # ("fsync", inode, is_dir, size) / ("replace", inode, src, dst)
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        st = os.fstat(fd)
        events.append(("fsync", st.st_ino, stat.S_ISDIR(st.st_mode), st.st_size))
        real_fsync(fd)

    def replace(src, dst) -> None:
        events.append(("replace", os.stat(src).st_ino, Path(src), Path(dst)))
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    root = tmp_path / "blobs"
    store = BlobStore(root)
    data = b"blob that must be durable" * 1000
    h = store.put(data)
    assert [e[0] for e in events] == ["fsync", "replace", "fsync"], events
    file_sync, rename, dir_sync = events
    # the temp file, holding every byte, is fsynced, then renamed to the blob's name ...
    assert file_sync[1:] == (rename[1], False, len(data))
    assert rename[2].parent == root and rename[2].name.startswith(TEMP_PREFIX)
    assert rename[3] == root / h.hex()
    # ... then the folder, so that the rename itself is on disk
    assert dir_sync[1:3] == (os.stat(root).st_ino, True)
    assert store.read(h) == data

    events.clear()
    store.put(data)  # already stored: nothing written, nothing to sync
    assert events == []

    target = tmp_path / "keys" / "node.key"
    atomic_write(target, b"secret", mode=0o600, prefix=".key-")
    assert [e[0] for e in events] == ["fsync", "replace"], events
    file_sync, rename = events
    assert file_sync[1:] == (rename[1], False, len(b"secret"))
    assert rename[3] == target and target.read_bytes() == b"secret"


def test_unusable_state_file(tmp_path):
    bad = tmp_path / "state.sqlite"
    bad.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoreError, match="unusable"):
        NodeState(bad)


def test_checkpoints_are_served_by_round_root_and_leaf(tmp_path):
    d, ckpt = DataDir(tmp_path), checkpoint_file(b"ckpt-bytes")
    d.add_checkpoint(2, b"\x01" * 32, 3, ckpt, b'{"proof": 1}')
    path, proof = d.get_checkpoint(2, b"\x01" * 32, 3)
    assert path.read_bytes() == ckpt and proof == b'{"proof": 1}'
    assert d.get_checkpoint(2, b"\x01" * 32, 4) is None
    assert d.get_checkpoint(3, b"\x01" * 32, 3) is None
    assert d.get(content_hash(ckpt)) == path


def test_dropping_a_round_frees_its_checkpoints_only(tmp_path):
    d = DataDir(tmp_path)
    d.add_checkpoint(1, b"\x01" * 32, 0, checkpoint_file(b"round-1-leaf-0" * 100), b"p")
    d.add_checkpoint(1, b"\x01" * 32, 1, checkpoint_file(b"shared-leaf" * 100), b"p")
    d.add_checkpoint(2, b"\x02" * 32, 0, checkpoint_file(b"shared-leaf" * 100), b"p")  # same bytes, still needed
    d.add_checkpoint(2, b"\x02" * 32, 1, checkpoint_file(b"round-2-leaf-1" * 100), b"p")
    assert d.state.checkpoint_rounds() == [1, 2]
    assert d.drop_checkpoints(1) == len(checkpoint_file(b"round-1-leaf-0" * 100))
    assert d.state.checkpoint_rounds() == [2]
    assert d.get_checkpoint(1, b"\x01" * 32, 0) is None and d.get_checkpoint(1, b"\x01" * 32, 1) is None
    assert not d.blobs.has(content_hash(checkpoint_file(b"round-1-leaf-0" * 100)))
    path, _ = d.get_checkpoint(2, b"\x02" * 32, 0)
    assert path.read_bytes() == checkpoint_file(b"shared-leaf" * 100)
    assert d.drop_checkpoints(1) == 0  # dropping twice is harmless


# rule 9: nothing of a round is served before its commit phase closes


def test_embargoed_work_is_withheld_from_peers_until_released(tmp_path):
    d = DataDir(tmp_path)
    envelope, ckpt = b"envelope-bytes", checkpoint_file(b"ckpt-bytes" * 10)
    d.state.embargo(4, [content_hash(envelope), content_hash(ckpt)])
    h = d.blobs.put(envelope)
    d.add_checkpoint(4, b"\x01" * 32, 0, ckpt, b"p")
    assert d.get(h) is None and d.get_checkpoint(4, b"\x01" * 32, 0) is None
    assert d.get(content_hash(ckpt)) is None
    assert d.blobs.read(h) == envelope  # the node itself still reads its work
    assert d.state.embargoed_rounds() == [4]
    assert d.state.release(4) == 2
    assert d.get(h) is not None and d.get_checkpoint(4, b"\x01" * 32, 0) is not None
    assert d.state.embargoed_rounds() == []


def test_an_embargo_survives_a_restart(tmp_path):
    d = DataDir(tmp_path)
    d.state.embargo(2, [content_hash(b"work")])
    h = d.blobs.put(b"work")
    d.state.close()
    again = DataDir(tmp_path)
    assert again.get(h) is None and again.state.embargoed_rounds() == [2]


def test_release_lifts_one_round_only_and_global_state_is_never_embargoed(tmp_path):
    d = DataDir(tmp_path)
    state = d.blobs.put(b"global-state")
    d.state.embargo(3, [content_hash(b"round-3")])
    d.state.embargo(4, [content_hash(b"round-4")])
    a, b = d.blobs.put(b"round-3"), d.blobs.put(b"round-4")
    d.state.release(3)
    assert d.get(a) is not None and d.get(b) is None and d.get(state) is not None
