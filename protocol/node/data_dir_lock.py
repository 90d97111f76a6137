"""One node per data dir: an exclusive lock on `DATA_DIR/node.lock`, held while the node runs.

Two processes on one data dir would both write its SQLite state and blob store and both act
for its account. The lock is an `flock` on the file, so the kernel drops it when the process
ends, however it ends (a SIGKILL leaves no stale lock to clean up); the file holds the pid of
the holder, which the refusal names.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

from protocol.core.errors import ConfigError

LOCK_FILE = "node.lock"


class DataDirInUse(ConfigError):
    """Raised when another running process holds the data dir's lock."""


class DataDirLock:
    """`with DataDirLock(path):` holds the data dir for this process (DataDirInUse if another
    holds it). The lock file is the only file made before the node's input is checked."""

    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / LOCK_FILE
        self._fd: int | None = None

    def acquire(self) -> DataDirLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise DataDirInUse(f"data dir {self.path.parent} is in use by another node (pid {holder}); "
                               "stop it first, or give this node its own --data-dir") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, 0)
            os.close(self._fd)  # closing the descriptor drops the lock
            self._fd = None

    def __enter__(self) -> DataDirLock:
        return self.acquire()

    def __exit__(self, *_exc: object) -> None:
        self.release()
