"""One node per data dir: the lock refuses a second holder, names the first, and dies with it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from protocol.node.data_dir_lock import LOCK_FILE, DataDirInUse, DataDirLock

HOLD = """
import sys
from pathlib import Path
from protocol.node.data_dir_lock import DataDirLock
lock = DataDirLock(Path(sys.argv[1])).acquire()
print("held", flush=True)
sys.stdin.read()
"""


def test_a_second_holder_is_refused_with_the_first_ones_pid(tmp_path: Path) -> None:
    with DataDirLock(tmp_path / "data"):
        with pytest.raises(DataDirInUse, match=rf"data dir .*data is in use by another node \(pid {os.getpid()}\)"):
            DataDirLock(tmp_path / "data").acquire()
    with DataDirLock(tmp_path / "data"):  # released on exit: the next node takes it
        pass
    assert [p.name for p in (tmp_path / "data").iterdir()] == [LOCK_FILE]


def test_a_killed_holder_leaves_no_stale_lock(tmp_path: Path) -> None:
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parents[2])
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    with pytest.raises(DataDirInUse, match=rf"pid {holder.pid}\)"):
        DataDirLock(tmp_path).acquire()
    holder.kill()  # SIGKILL: no clean-up runs
    holder.wait()
    DataDirLock(tmp_path).acquire().release()
