"""Writing a checkpoint into the blob folder without building its bytes in memory.

safetensors writes the tensors straight to a temp file; the file is then hashed in chunks
(its content hash names it), fsynced and renamed, as `protocol.node.store.write_blob` does for
bytes. The file holds exactly `encode_checkpoint`'s bytes.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import safetensors.torch

from protocol.core.checkpoint import Checkpoint, checkpoint_layout
from protocol.core.hashing import content_hasher
from protocol.core.model import ModelConfig
from protocol.node.store import TEMP_PREFIX

READ_CHUNK = 1 << 20


def _hash_file(path: Path) -> bytes:
    hasher = content_hasher()
    with path.open("rb") as handle:
        while chunk := handle.read(READ_CHUNK):
            hasher.update(chunk)
    return hasher.digest()


def store_checkpoint(root: Path, checkpoint: Checkpoint, model: ModelConfig) -> bytes:
    """Write `checkpoint` into blob folder `root` under its content hash; return the hash."""
    root = Path(root)
    fd, name = tempfile.mkstemp(dir=root, prefix=TEMP_PREFIX)
    os.close(fd)
    tmp = Path(name)
    try:
        tensors, meta = checkpoint_layout(checkpoint, model)
        safetensors.torch.save_file(tensors, str(tmp), metadata=meta)
        blob_hash = _hash_file(tmp)
        with tmp.open("rb") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, root / blob_hash.hex())
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    dir_fd = os.open(root, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    return blob_hash
