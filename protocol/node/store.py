"""A node's data dir: a content-addressed blob store plus SQLite state.

Layout: `<data_dir>/blobs/<hex blake3>` and `<data_dir>/state.sqlite`.
- Blobs are written to a temp file in the same folder, fsynced, then renamed, so a
  crash never leaves a half-written blob under its final name; leftover temp files are
  swept at open.
- SQLite runs in WAL mode with synchronous=FULL: a committed row survives SIGKILL.
  The journal keeps what a restarted node needs and the chain cannot tell it (score
  salts, which blob a round committed to); the chain stays the source of truth for
  whether a transaction happened, so a restart never re-sends one that landed.
"""

from __future__ import annotations

import json
import os
import secrets
import sqlite3
import tempfile
import threading
from pathlib import Path
from typing import Any

from protocol.config.atomic import atomic_write
from protocol.core.checkpoint.part_bytes import CheckpointPart
from protocol.core.checkpoint.tensor_subset import SplicedFile
from protocol.core.crypto.hashing import content_hash
from protocol.core.errors import VeritrainError
from protocol.core.wire.messages import PartName
from protocol.node.checkpoint_part_files import holds_part, part_view

TEMP_PREFIX = ".partial-"


class StoreError(VeritrainError):
    """Raised when the data dir is unusable or a stored blob fails its hash check."""


class BlobStore:
    """Content-addressed files; the p2p layer's `BlobSource` and `BlobSink` (fetches stream
    into a `.partial-*` file here, renamed once its hash checks)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        for leftover in self.root.glob(TEMP_PREFIX + "*"):
            leftover.unlink(missing_ok=True)

    def path_for(self, blob_hash: bytes) -> Path:
        if len(blob_hash) != 32:
            raise StoreError(f"blob hash must be 32 bytes, got {len(blob_hash)}")
        return self.root / blob_hash.hex()

    def has(self, blob_hash: bytes) -> bool:
        return self.path_for(blob_hash).is_file()

    def get(self, blob_hash: bytes) -> Path | None:
        path = self.path_for(blob_hash)
        return path if path.is_file() else None

    def read(self, blob_hash: bytes) -> bytes:
        """The blob's bytes, re-verified against its name (disks rot, people edit files)."""
        path = self.get(blob_hash)
        if path is None:
            raise StoreError(f"blob {blob_hash.hex()} not in store")
        data = path.read_bytes()
        if content_hash(data) != blob_hash:
            raise StoreError(f"blob {blob_hash.hex()} is corrupt on disk")
        return data

    def put(self, data: bytes) -> bytes:
        return write_blob(self.root, data)

    def temp_file(self) -> tuple[int, Path]:
        """A fresh temp file in the store (same filesystem: the rename is atomic; swept at open)."""
        fd, tmp = tempfile.mkstemp(dir=self.root, prefix=TEMP_PREFIX)
        return fd, Path(tmp)


def write_blob(root: Path, data: bytes) -> bytes:
    """Store `data` durably under its content hash in the blob folder `root` and return the
    hash. Safe from any of the node's processes (temp file, fsync, rename), which is how a
    miner's worker stores its checkpoints without shipping them to the node process."""
    blob_hash = content_hash(data)
    final = Path(root) / blob_hash.hex()
    if final.is_file():
        return blob_hash
    atomic_write(final, data, prefix=TEMP_PREFIX)
    _fsync_dir(Path(root))
    return blob_hash


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


_SCHEMA = """
CREATE TABLE IF NOT EXISTS kv (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS checkpoints (
    round INTEGER NOT NULL, trace_root TEXT NOT NULL, leaf INTEGER NOT NULL,
    blob TEXT NOT NULL, proof BLOB NOT NULL, PRIMARY KEY (round, trace_root, leaf)
);
CREATE TABLE IF NOT EXISTS embargo (
    round INTEGER NOT NULL, blob TEXT NOT NULL, PRIMARY KEY (round, blob)
);
CREATE TABLE IF NOT EXISTS superseded (  -- files of checkpoint entries replaced by a fuller part
    round INTEGER NOT NULL, blob TEXT NOT NULL, PRIMARY KEY (round, blob)
);
CREATE TABLE IF NOT EXISTS journal (
    round INTEGER NOT NULL, step TEXT NOT NULL, data TEXT NOT NULL,
    PRIMARY KEY (round, step)
);
"""


class NodeState:
    """Small durable key/value and per-round journal; safe to share between threads."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        try:
            self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.executescript(_SCHEMA)
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"node state {self.path} is unusable: {exc}") from exc

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def set(self, key: str, value: Any) -> None:
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO kv VALUES (?, ?)", (key, json.dumps(value)))

    def get(self, key: str, default: Any = None) -> Any:
        with self._lock:
            row = self._db.execute("SELECT value FROM kv WHERE key = ?", (key,)).fetchone()
        return default if row is None else json.loads(row[0])

    def record(self, round_: int, step: str, data: dict[str, Any]) -> None:
        """Durably note that `step` of `round_` happened (or is about to), with its data."""
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO journal VALUES (?, ?, ?)", (round_, step, json.dumps(data)))

    def recall(self, round_: int, step: str) -> dict[str, Any] | None:
        with self._lock:
            row = self._db.execute("SELECT data FROM journal WHERE round = ? AND step = ?", (round_, step)).fetchone()
        return None if row is None else json.loads(row[0])

    def steps(self, round_: int) -> list[str]:
        with self._lock:
            rows = self._db.execute("SELECT step FROM journal WHERE round = ? ORDER BY rowid", (round_,)).fetchall()
        return [r[0] for r in rows]


    def embargo(self, round_: int, blob_hashes: list[bytes]) -> None:
        """Durably withhold these blobs (a round's own work) from peers until `release`."""
        with self._lock:
            self._db.executemany("INSERT OR IGNORE INTO embargo VALUES (?, ?)",
                                 [(round_, h.hex()) for h in blob_hashes])

    def release(self, round_: int) -> int:
        """Lift `round_`'s embargo (its commit phase closed); returns how many blobs it held."""
        with self._lock:
            return self._db.execute("DELETE FROM embargo WHERE round = ?", (round_,)).rowcount

    def embargoed(self, blob_hash: bytes) -> bool:
        with self._lock:
            row = self._db.execute("SELECT 1 FROM embargo WHERE blob = ? LIMIT 1", (blob_hash.hex(),)).fetchone()
        return row is not None

    def embargoed_rounds(self) -> list[int]:
        with self._lock:
            return [r[0] for r in self._db.execute("SELECT DISTINCT round FROM embargo ORDER BY round")]

    def index_checkpoint(self, round_: int, trace_root: bytes, leaf: int, blob_hash: bytes, proof: bytes) -> None:
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO checkpoints VALUES (?, ?, ?, ?, ?)",
                             (round_, trace_root.hex(), leaf, blob_hash.hex(), proof))

    def supersede_checkpoint(self, round_: int, trace_root: bytes, leaf: int, blob_hash: bytes, proof: bytes) -> None:
        """Point an entry at a fuller part of the same checkpoint. Its old file may still be read
        by a check that fetched it, so it is deleted with the round (`unindex_checkpoints`)."""
        with self._lock, self._db:  # the connection commits the transaction, or rolls it back on any error
            self._db.execute("BEGIN IMMEDIATE")
            self._db.execute("INSERT OR IGNORE INTO superseded SELECT round, blob FROM checkpoints "
                             "WHERE round = ? AND trace_root = ? AND leaf = ?", (round_, trace_root.hex(), leaf))
            self._db.execute("INSERT OR REPLACE INTO checkpoints VALUES (?, ?, ?, ?, ?)",
                             (round_, trace_root.hex(), leaf, blob_hash.hex(), proof))

    def checkpoint_rounds(self) -> list[int]:
        with self._lock:
            return [r[0] for r in self._db.execute("SELECT DISTINCT round FROM checkpoints ORDER BY round")]

    def unindex_checkpoint(self, round_: int, trace_root: bytes, leaf: int) -> bytes | None:
        """Forget one checkpoint entry: its blob hash if no other entry still points to it."""
        with self._lock:
            row = self._db.execute("SELECT blob FROM checkpoints WHERE round = ? AND trace_root = ? AND leaf = ?",
                                   (round_, trace_root.hex(), leaf)).fetchone()
            if row is None:
                return None
            self._db.execute("DELETE FROM checkpoints WHERE round = ? AND trace_root = ? AND leaf = ?",
                             (round_, trace_root.hex(), leaf))
            still = self._db.execute("SELECT 1 FROM checkpoints WHERE blob = ? LIMIT 1", (row[0],)).fetchone()
        return None if still is not None else bytes.fromhex(row[0])

    def unindex_checkpoints(self, round_: int) -> frozenset[bytes]:
        """Forget `round_`'s checkpoints: the blob hashes no other entry still points to."""
        with self._lock:
            rows = self._db.execute("SELECT blob FROM checkpoints WHERE round = ? UNION "
                                    "SELECT blob FROM superseded WHERE round = ?", (round_, round_)).fetchall()
            self._db.execute("DELETE FROM checkpoints WHERE round = ?", (round_,))
            self._db.execute("DELETE FROM superseded WHERE round = ?", (round_,))
            still = {r[0] for r in self._db.execute("SELECT DISTINCT blob FROM checkpoints")}
        return frozenset(bytes.fromhex(r[0]) for r in rows if r[0] not in still)

    def checkpoint_entry(self, round_: int, trace_root: bytes, leaf: int) -> tuple[bytes, bytes] | None:
        with self._lock:
            row = self._db.execute("SELECT blob, proof FROM checkpoints WHERE round = ? AND trace_root = ? AND leaf = ?",
                                   (round_, trace_root.hex(), leaf)).fetchone()
        return None if row is None else (bytes.fromhex(row[0]), bytes(row[1]))


class DataDir:
    """A node's data dir: blobs + state. Also the p2p layer's blob and checkpoint source."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.blobs = BlobStore(self.root / "blobs")
        self.state = NodeState(self.root / "state.sqlite")
        # naming-and-indexing a fetched checkpoint and dropping one are atomic with respect to each
        # other: two checks sharing a file (every miner's leaf 0) never leave an entry without it
        self._checkpoint_lock = threading.Lock()

    def get(self, blob_hash: bytes) -> Path | None:
        """What peers may fetch by hash: any held blob but an embargoed one (a round's own
        work before its commit phase closes, docs/PROTOCOL.md §9). The node's own reads go
        through `blobs`."""
        if self.state.embargoed(blob_hash):
            return None
        return self.blobs.get(blob_hash)

    def add_checkpoint(self, round_: int, trace_root: bytes, leaf: int, data: bytes, proof: bytes) -> None:
        """Keep a checkpoint to serve by (round, trace root, leaf): the miner's own, or a
        validator's evidence (served even if the miner stops serving)."""
        self.state.index_checkpoint(round_, trace_root, leaf, self.blobs.put(data), proof)

    def checkpoint_sink(self) -> CheckpointSink:
        """Where a fetched checkpoint streams to (hash-checked as it arrives) before its proof is
        checked: a private file in the blob folder, named by its hash only by `keep_fetched`."""
        return CheckpointSink(self.blobs)

    def held_checkpoint(self, round_: int, trace_root: bytes, leaf: int) -> tuple[Path, bytes] | None:
        """(file, proof) of an indexed checkpoint, embargoed or not (the node's own use)."""
        entry = self.state.checkpoint_entry(round_, trace_root, leaf)
        path = None if entry is None else self.blobs.get(entry[0])
        return None if entry is None or path is None else (path, entry[1])

    def keep_fetched(self, round_: int, trace_root: bytes, leaf: int, fetched: Path, blob_hash: bytes,
                     proof: bytes, part: CheckpointPart = CheckpointPart.ALL) -> tuple[Path, bool]:
        """Name a fetched checkpoint (or `part` of one) whose proof checked by its hash and index
        it: (its path, whether the entry is new). An entry already there (with its file) that holds
        `part` is kept and `fetched` deleted; one that does not is replaced, and stays not new:
        someone kept it, and it is dropped with the round."""
        with self._checkpoint_lock:
            held = self.held_checkpoint(round_, trace_root, leaf)
            if held is not None and holds_part(held[0], part):
                fetched.unlink(missing_ok=True)
                return held[0], False
            final = self.blobs.path_for(blob_hash)
            os.replace(fetched, final)  # same content if already there (content-addressed)
            _fsync_dir(self.blobs.root)  # the name reaches the disk before the entry does
            if held is None:
                self.state.index_checkpoint(round_, trace_root, leaf, blob_hash, proof)
            else:
                self.state.supersede_checkpoint(round_, trace_root, leaf, blob_hash, proof)
            return final, held is None

    def drop_checkpoint(self, round_: int, trace_root: bytes, leaf: int) -> int:
        """Delete one indexed checkpoint (its file only once no other entry refers to it: the same
        bytes may be another miner's leaf or this node's own); returns the bytes freed."""
        with self._checkpoint_lock:
            blob_hash = self.state.unindex_checkpoint(round_, trace_root, leaf)
            path = None if blob_hash is None else self.blobs.get(blob_hash)
            if path is None:
                return 0
            freed = path.stat().st_size
            path.unlink(missing_ok=True)
            return freed

    def drop_checkpoints(self, round_: int) -> int:
        """Delete `round_`'s checkpoints (index first, so a crash leaves at worst an orphan
        file, never an entry without its file); returns the bytes freed."""
        freed = 0
        with self._checkpoint_lock:
            for blob_hash in self.state.unindex_checkpoints(round_):
                path = self.blobs.get(blob_hash)
                if path is not None:
                    freed += path.stat().st_size
                    path.unlink(missing_ok=True)
        return freed

    def get_checkpoint(self, round_: int, trace_root: bytes, index: int,
                       part: PartName = "all", asker: bytes = b"") -> tuple[Path | SplicedFile, bytes] | None:
        """What peers may fetch: `part` of an indexed checkpoint not embargoed, if it holds it."""
        entry = self.state.checkpoint_entry(round_, trace_root, index)
        if entry is None or self.state.embargoed(entry[0]):
            return None
        path = self.blobs.get(entry[0])
        view = None if path is None else part_view(path, CheckpointPart(part))
        return None if view is None else (view, entry[1])


class CheckpointSink:
    """A `BlobSink` for checkpoints: a download lands in a private `.partial-*` file in the blob
    folder (swept at open), never under the content hash that other entries or blobs may use."""

    def __init__(self, blobs: BlobStore) -> None:
        self.blobs = blobs

    def get(self, blob_hash: bytes) -> Path | None:
        return None  # checkpoints are asked for by (round, root, leaf), never by hash

    def path_for(self, blob_hash: bytes) -> Path:
        self.blobs.path_for(blob_hash)  # the length check
        return self.blobs.root / f"{TEMP_PREFIX}ckpt-{secrets.token_hex(8)}-{blob_hash.hex()}"

    def temp_file(self) -> tuple[int, Path]:
        return self.blobs.temp_file()
