"""Where a fetched blob's bytes go while they arrive (the reader hashes them as they pass).

- Into a blob store: a `.partial-*` file in its folder, written in batches, fsynced and renamed
  under the content hash once the hash checks; deleted on failure. Nothing is kept in memory.
- Into memory (no store): a small blob's pieces are joined once at the end. A large one (a
  checkpoint) is spooled to an anonymous temp file and read back once into one `bytes`, so the
  process never holds it twice (all its pieces and their join).

The sink is opened only after the header's length passed its cap (framing.read_head).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from protocol.p2p.sources import BlobSink

SPOOL_BYTES = 8 << 20  # in-memory fetches larger than this go through a temp file
FLUSH_BYTES = 1 << 20  # pieces written out with one writev per this many bytes
_IOV_MAX = 1024  # buffers per writev call (Linux IOV_MAX)


class Sink:
    """Pieces are kept as the views the reader handed out (no copy) until written or joined."""

    def __init__(self, fd: int | None = None, tmp: Path | None = None, store: BlobSink | None = None) -> None:
        self.fd, self.tmp, self.store = fd, tmp, store
        self.pieces: list[bytes | memoryview] = []
        self.pending = 0

    @classmethod
    def open(cls, store: BlobSink | None, blob_len: int, spool_dir: Path | None) -> Sink:
        """A sink for a blob of `blob_len` bytes: into `store`, else into memory."""
        if store is not None:
            fd, tmp = store.temp_file()
            return cls(fd, tmp, store)
        if blob_len > SPOOL_BYTES:
            fd, name = tempfile.mkstemp(dir=spool_dir, prefix=".partial-spool-")  # swept like downloads
            os.unlink(name)  # anonymous from here on: a crash leaves nothing behind
            return cls(fd)
        return cls()

    def write(self, data: bytes | memoryview) -> None:
        self.pieces.append(data)
        self.pending += len(data)
        if self.fd is not None and self.pending >= FLUSH_BYTES:
            self._flush()

    def _flush(self) -> None:
        assert self.fd is not None
        views = [memoryview(p) for p in self.pieces]
        while views:
            written = os.writev(self.fd, views[:_IOV_MAX])
            while views and written >= len(views[0]):
                written -= len(views.pop(0))
            if views and written:
                views[0] = views[0][written:]
        self.pieces, self.pending = [], 0

    def commit(self, digest: bytes) -> bytes | Path:
        """The verified blob: its bytes, or its final path in the store."""
        if self.fd is None:
            data, self.pieces = b"".join(self.pieces), []
            return data
        self._flush()
        fd, self.fd = self.fd, None
        if self.store is None or self.tmp is None:
            os.lseek(fd, 0, os.SEEK_SET)
            with open(fd, "rb", buffering=0) as spool:  # closes fd; readall sizes its one buffer by fstat
                return spool.readall()
        try:
            os.fsync(fd)  # the bytes reach the disk before the name does
        finally:
            os.close(fd)
        final = self.store.path_for(digest)
        os.replace(self.tmp, final)  # atomic: readers see all of it or nothing
        self.tmp = None
        return final

    def abort(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        if self.tmp is not None:
            self.tmp.unlink(missing_ok=True)
            self.tmp = None
        self.pieces, self.pending = [], 0
