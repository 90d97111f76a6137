"""Keep freed transfer buffers in the process instead of handing them back to the kernel.

glibc's malloc gives each allocation above a threshold (dynamic, 128 KiB to 32 MiB) its own
mmap, unmapped again on free, and returns the top of the heap to the kernel once more than
twice that threshold is free. A node receiving a 50 MB blob or a 14 MB checkpoint therefore
writes into fresh pages on every transfer, and each fresh 4 KiB page costs a page fault:
3.6 µs here (a VM), 0.9 ms per MB, more than decrypting that MB. With both thresholds raised,
transfer buffers come from the heap and go back to it, and the next transfer reuses them.

Measured on a 50 MB blob fetch (tests/p2p and `python -m benchmarks p2p`): a fetch after the
first went from 256 to 0 page faults per MB and from 3.5 to 2.4 ms of CPU per MB.

The cost: a node's RSS stays near its peak working set (a few blobs) instead of shrinking
between transfers. Only glibc has `mallopt`; elsewhere this does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import platform
from functools import cache

M_TRIM_THRESHOLD = -1  # glibc <malloc.h>
M_MMAP_THRESHOLD = -3
# Allocations up to this size come from the heap: transfer buffers, envelopes, and the states and
# checkpoints of the smaller presets; a larger blob is read once, into its own mapping (sink.py).
MMAP_THRESHOLD_BYTES = 64 << 20
# Free heap kept before trimming: room for a few transfers in flight at once.
TRIM_THRESHOLD_BYTES = 256 << 20


@cache
def keep_freed_buffers() -> bool:
    """Raise glibc's mmap and trim thresholds once per process; True if it applied."""
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    mmap_ok = libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES) == 1
    trim_ok = libc.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES) == 1
    return mmap_ok and trim_ok
