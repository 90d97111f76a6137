"""Transfer buffers are reused across transfers instead of faulted in afresh (memory.py)."""

from __future__ import annotations

import platform
import resource

import pytest

from protocol.p2p import memory

BLOB = 40 << 20  # above glibc's largest default mmap threshold (32 MiB): always a fresh mmap


def _faults_to_fill_a_blob() -> int:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    blob = b"x" * BLOB  # malloc + write every page, as receiving a blob does
    after = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    del blob
    return after - before


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")
def test_a_freed_blob_buffer_is_reused_without_page_faults():
    assert memory.keep_freed_buffers()
    _faults_to_fill_a_blob()  # the first one may grow the heap
    pages = BLOB // 4096
    # without the tuning every fill is a fresh mmap: one fault per 4 KiB page (10 240)
    assert _faults_to_fill_a_blob() < pages // 10
