"""Writing a checkpoint into the blob folder without building its bytes in memory.

Each tensor's bytes go straight from the tensor to a temp file and, in the same pass, into the
content hash that names the file (`protocol.core.checkpoint.safetensors_layout`: no serialized copy, no
read-back); the file is then fsynced and renamed, as `protocol.node.store.write_blob` does for
bytes. The file holds exactly `encode_checkpoint`'s bytes.
"""

from __future__ import annotations

import os
import tempfile
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from protocol.core.checkpoint.format import Checkpoint, Leaves, checkpoint_layout, checkpoint_leaves
from protocol.core.checkpoint.safetensors_layout import serialized
from protocol.core.crypto.hashing import content_hasher
from protocol.core.model.gpt import ModelConfig
from protocol.node.store import TEMP_PREFIX


def _write_temp(root: Path, checkpoint: Checkpoint, model: ModelConfig, leaves: Leaves) -> tuple[Path, bytes]:
    """`checkpoint` in a temp file in `root` (not yet durable) and its content hash."""
    fd, name = tempfile.mkstemp(dir=root, prefix=TEMP_PREFIX)
    tmp = Path(name)
    try:
        hasher = content_hasher()
        with os.fdopen(fd, "wb") as f:  # buffered: a write is whole (a raw one may be short)
            for piece in serialized(*checkpoint_layout(checkpoint, model, leaves)):
                f.write(piece)
                hasher.update(piece)
        return tmp, hasher.digest()
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _fsync_path(path: Path, flags: int = os.O_RDONLY) -> None:
    fd = os.open(path, flags)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class CheckpointWriter:
    """A round's checkpoints into blob folder `root`: each written to a temp file and hashed as it
    is made (the sink of `submission.honest_streamed`) and fsynced by a background thread while
    the next segment trains (an fsync waits on the disk, not on a core); `commit` waits for those,
    renames each to its content hash and fsyncs the folder. Nothing is under a final name before
    its bytes are on disk; `abort` removes what a failed round wrote."""

    def __init__(self, root: Path, model: ModelConfig) -> None:
        self.root, self.model = Path(root), model
        self._pending: list[tuple[Path, bytes, Future[None]]] = []
        self._syncs = ThreadPoolExecutor(max_workers=1, thread_name_prefix="checkpoint-fsync")

    def __call__(self, _leaf: int, checkpoint: Checkpoint, leaves: Leaves) -> bytes:
        tmp, blob_hash = _write_temp(self.root, checkpoint, self.model, leaves)
        self._pending.append((tmp, blob_hash, self._syncs.submit(_fsync_path, tmp)))
        return blob_hash

    def commit(self) -> None:
        for _, _, synced in self._pending:
            synced.result()  # an fsync that failed fails the round (the caller aborts)
        for tmp, blob_hash, _ in self._pending:
            os.replace(tmp, self.root / blob_hash.hex())
        _fsync_path(self.root)
        self._pending = []
        self._syncs.shutdown()

    def abort(self) -> None:
        self._syncs.shutdown(wait=True)  # no fsync left running on a file about to go
        for tmp, _, _ in self._pending:
            tmp.unlink(missing_ok=True)
        self._pending = []


def store_checkpoint(root: Path, checkpoint: Checkpoint, model: ModelConfig) -> bytes:
    """Write `checkpoint` durably into blob folder `root` under its content hash; return the hash."""
    writer = CheckpointWriter(root, model)
    try:
        blob_hash = writer(0, checkpoint, checkpoint_leaves(checkpoint))
        writer.commit()
    except BaseException:
        writer.abort()
        raise
    return blob_hash
