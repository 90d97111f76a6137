"""Transfer buffers are reused across transfers instead of faulted in afresh (memory.py).

`keep_freed_buffers()` changes glibc's malloc for the whole process, so each measurement
runs in a fresh interpreter of its own and this pytest process is left as it was.
"""

from __future__ import annotations

import json
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from protocol.p2p import memory

REPO = Path(__file__).resolve().parents[2]
BLOB = 40 << 20  # above glibc's largest default mmap threshold (32 MiB): always a fresh mmap
PAGES = BLOB // 4096

_MEASURE = f"""
import ctypes, json, resource, sys
from protocol.p2p import memory

# count 4 KiB pages whatever the host's transparent huge page setting
libc = ctypes.CDLL(None, use_errno=True)
if libc.prctl(41, 1, 0, 0, 0) != 0:  # PR_SET_THP_DISABLE
    raise OSError(ctypes.get_errno(), "prctl(PR_SET_THP_DISABLE)")

def faults_to_fill_a_blob():
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    blob = b"x" * {BLOB}  # malloc + write every page, as receiving a blob does
    after = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    del blob
    return after - before

tuned = memory.keep_freed_buffers() if sys.argv[1] == "tuned" else None
faults_to_fill_a_blob()  # the first one may grow the heap
print(json.dumps({{"tuned": tuned, "faults": faults_to_fill_a_blob(),
                  "calls": memory.keep_freed_buffers.cache_info().misses}}))
"""


def _measure(mode: str) -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", _MEASURE, mode], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")
def test_a_freed_blob_buffer_is_reused_without_page_faults():
    calls_here = memory.keep_freed_buffers.cache_info()
    plain, tuned = _measure("plain"), _measure("tuned")
    # without the tuning every fill is a fresh mmap: one fault per 4 KiB page (10 240)
    assert plain["calls"] == 0 and plain["faults"] >= PAGES * 9 // 10, plain
    # with it the freed buffer stays in the heap and the next fill reuses its pages
    assert tuned["tuned"] is True and tuned["calls"] == 1, tuned
    assert tuned["faults"] < PAGES // 10, tuned
    # this process's malloc was not touched by the test
    assert memory.keep_freed_buffers.cache_info() == calls_here
