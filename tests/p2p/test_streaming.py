"""Large blobs stream: each fetch is capped by its kind, and a blob is never held twice.

Two real py-libp2p hosts on 127.0.0.1 move a 100 MiB blob, the size of a `small`-preset
checkpoint, which is over the 64 MiB every kind used to share. Python's allocations
(tracemalloc: bytes, bytearrays, py-libp2p's buffers, both hosts) are measured around each fetch.
"""

from __future__ import annotations

import os
import tracemalloc
from pathlib import Path
from typing import Any

import blake3
import pytest
import trio

from protocol.core.model.gpt import preset
from protocol.core.train.compute_config import ComputeConfig
from protocol.core.wire.blob_caps import BlobKind, blob_caps
from protocol.p2p import DirectoryBlobSource
from protocol.p2p.errors import FrameTooLarge
from protocol.p2p.sink import SPOOL_BYTES, Sink

from .conftest import cluster

MB = 1024 * 1024
BLOB = 100 * MB
CAPS = blob_caps(preset("small"), ComputeConfig())  # checkpoint ~178 MB, state ~45 MB


def _write_random_blob(store: DirectoryBlobSource, size: int) -> bytes:
    """A random blob written to `store` a MiB at a time (never whole in this process)."""
    fd, tmp = store.temp_file()
    hasher = blake3.blake3()
    with os.fdopen(fd, "wb") as f:
        for _ in range(size // MB):
            chunk = os.urandom(MB)
            hasher.update(chunk)
            f.write(chunk)
    digest = hasher.digest()
    tmp.rename(store.path_for(digest))
    return digest


def _partials(root: Path) -> list[str]:
    return [p.name for p in root.iterdir() if p.name.startswith(".partial-")]


class FileCheckpoints:
    """A checkpoint source that serves one file (as the node's data dir does)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def get_checkpoint(self, round_: int, trace_root: bytes, index: int, part: str = "all",
                       asker: bytes = b"") -> tuple[bytes | Path, bytes] | None:
        return (self.path, b"proof") if index == 0 else None


async def _peak_during(fetch: Any) -> tuple[Any, int]:
    """What awaiting `fetch` returns (or the FrameTooLarge it raises) and the peak of Python
    allocations above where they were, in bytes."""
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        try:
            got = await fetch
        except FrameTooLarge as exc:
            got = exc
        return got, tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


@pytest.mark.trio
async def test_a_100mb_blob_streams_under_its_kind_cap_and_is_refused_over_it(tmp_path):
    assert CAPS.state < BLOB < CAPS.checkpoint
    with trio.fail_after(240):
        async with cluster(tmp_path, 2) as c:
            server, client = c.nodes
            key, store = server.identity.public_key, c.stores[1]
            h = _write_random_blob(c.stores[0], BLOB)
            server.server.checkpoints = FileCheckpoints(c.stores[0].path_for(h))

            # as a global state it is over its cap: refused on the header, before a byte is taken
            got, peak = await _peak_during(client.fetch_blob(key, h, store, CAPS.of(BlobKind.STATE)))
            assert isinstance(got, FrameTooLarge) and store.get(h) is None and not _partials(store.root)
            assert peak < BLOB // 10, f"a refused blob allocated {peak / MB:.0f} MiB"
            got, _ = await _peak_during(client.fetch_checkpoint(key, 1, b"r" * 32, 0, max_bytes=BLOB - 1))
            assert isinstance(got, FrameTooLarge)

            # into the store: streamed through a temp file, renamed once the hash checks
            got, peak = await _peak_during(client.fetch_blob(key, h, store, CAPS.of(BlobKind.CHECKPOINT)))
            assert got == store.path_for(h) and not _partials(store.root)
            assert blake3.blake3(got.read_bytes()).digest() == h
            assert peak < BLOB // 4, f"streaming into the store peaked at {peak / MB:.0f} MiB"

            # into memory, as validators fetch checkpoints: one copy, spooled on the way (joining
            # the received pieces, as fetches did before, peaks at twice the blob)
            got, peak = await _peak_during(client.fetch_checkpoint(key, 1, b"r" * 32, 0, max_bytes=CAPS.checkpoint))
            assert got.blob_hash == h and blake3.blake3(got.data).digest() == h
            assert peak < 1.5 * BLOB, f"an in-memory fetch peaked at {peak / MB:.0f} MiB"


@pytest.mark.parametrize("size", [10, SPOOL_BYTES + 1])
def test_in_memory_sink_returns_the_bytes_from_memory_or_its_spool(tmp_path, size):
    data = os.urandom(size)
    sink = Sink.open(None, size, tmp_path)
    for off in range(0, size, 3 * MB):
        sink.write(memoryview(data)[off:off + 3 * MB])
    assert (sink.fd is not None) == (size > SPOOL_BYTES)
    assert not list(tmp_path.iterdir())  # the spool file has no name
    assert sink.commit(blake3.blake3(data).digest()) == data
    assert sink.fd is None


def test_store_sink_renames_on_commit_and_leaves_nothing_on_abort(tmp_path):
    store = DirectoryBlobSource(tmp_path)
    data = os.urandom(2 * MB + 5)
    digest = blake3.blake3(data).digest()
    sink = Sink.open(store, len(data), None)
    sink.write(data)
    assert sink.commit(digest) == store.path_for(digest) and store.path_for(digest).read_bytes() == data
    failed = Sink.open(store, len(data), None)
    failed.write(data[:MB + 1])
    failed.abort()
    assert sorted(p.name for p in tmp_path.iterdir()) == [digest.hex()]
