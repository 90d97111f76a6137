"""Where served blobs come from, and the tiny directory-backed store used by tests.

The node's real content-addressed store (protocol/node/store.py) implements `BlobSource.get`
and, to be fetched into, `BlobSink`; checkpoints (with their Merkle proofs, opaque here) come from a
`CheckpointSource` that the miner or an evidence-keeping validator provides.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Protocol

from protocol.core.checkpoint.header import MAX_HEADER_BYTES
from protocol.core.checkpoint.part_bytes import CheckpointPart, part_of_blob
from protocol.core.checkpoint.tensor_subset import SplicedFile, SubsetError
from protocol.core.crypto.hashing import content_hash
from protocol.core.wire.messages import PartName

Served = bytes | Path | SplicedFile


class BlobSource(Protocol):
    def get(self, blob_hash: bytes) -> bytes | Path | None:
        """The blob's bytes, or a path to a file holding exactly them, or None."""
        ...


class BlobSink(Protocol):
    """A content-addressed folder that fetches stream into: `DirectoryBlobSource` here, the
    node's `BlobStore` (protocol/node/store.py). A download lives in `temp_file()` until its
    hash checks, then is renamed to `path_for(hash)`."""

    def get(self, blob_hash: bytes) -> Path | None: ...

    def path_for(self, blob_hash: bytes) -> Path: ...

    def temp_file(self) -> tuple[int, Path]: ...


class CheckpointSource(Protocol):
    def get_checkpoint(
        self, round_: int, trace_root: bytes, index: int, part: PartName = "all", asker: bytes = b""
    ) -> tuple[Served, bytes] | None:
        """(`part` of the checkpoint, Merkle proof bytes), or None if not held (or held without
        that part). Parts are opaque here: `CheckpointRequest.part`. `asker`: the requesting
        peer's account (20 bytes; the devnet's withholding cheat refuses by it)."""
        ...


class DirectoryBlobSource:
    """Blobs stored as `<root>/<hex hash>`; written via temp file + atomic rename."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    def path_for(self, blob_hash: bytes) -> Path:
        return self.root / blob_hash.hex()

    def get(self, blob_hash: bytes) -> Path | None:
        path = self.path_for(blob_hash)
        return path if path.is_file() else None

    def put(self, data: bytes) -> bytes:
        h = content_hash(data)
        fd, tmp = tempfile.mkstemp(dir=self.root, prefix=".partial-")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, self.path_for(h))
        return h

    def temp_file(self) -> tuple[int, Path]:
        """A fresh temp file in the store dir (same filesystem, so rename is atomic)."""
        fd, tmp = tempfile.mkstemp(dir=self.root, prefix=".partial-")
        return fd, Path(tmp)


class MemoryCheckpointSource:
    """Checkpoints held in memory, keyed by (round, trace_root, index). For tests/devnet."""

    def __init__(self) -> None:
        self._items: dict[tuple[int, bytes, int], tuple[bytes, bytes]] = {}

    def add(self, round_: int, trace_root: bytes, index: int, data: bytes, proof: bytes) -> None:
        self._items[(round_, trace_root, index)] = (data, proof)

    def get_checkpoint(
        self, round_: int, trace_root: bytes, index: int, part: PartName = "all", asker: bytes = b""
    ) -> tuple[Served, bytes] | None:
        item = self._items.get((round_, trace_root, index))
        if item is None or part == "all":
            return item
        try:
            return part_of_blob(item[0], CheckpointPart(part), MAX_HEADER_BYTES), item[1]
        except SubsetError:
            return None
