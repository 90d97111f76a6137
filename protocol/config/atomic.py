"""Crash-safe file writes: a temp file in the same folder, fsynced, then renamed."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO


@contextlib.contextmanager
def atomic_stream(path: Path, mode: int | None = None, prefix: str = ".partial-") -> Iterator[IO[bytes]]:
    """A handle to write `path` in chunks so a crash leaves either the old file or the whole new
    one, never a half-written file under the final name; removed if anything fails. `mode` is
    set before any byte is written."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=prefix)
    try:
        if mode is not None:
            os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write(path: Path, data: bytes, mode: int | None = None, prefix: str = ".partial-") -> None:
    """`atomic_stream` for bytes already in hand."""
    with atomic_stream(path, mode, prefix) as handle:
        handle.write(data)
