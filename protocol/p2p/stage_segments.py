"""Where served stage segments come from (PROTOCOL.md §16.5; the `stage_segment` request of
docs/INTEROP.md §5): the interface the blob server reads, and a folder of them.

A segment is one opaque blob here (`protocol/core/pipeline/segment_bundle.py` encodes it),
keyed by (round, the stage's trace root, segment index). Bytes only: the fetcher decodes it and
its replay checks it against the trace root it asked by, so this layer needs neither torch nor a
content hash.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Protocol

TRACE_ROOT_LEN = 32


class StageSegmentSource(Protocol):
    def get_segment(
        self, round_: int, trace_root: bytes, segment: int, asker: bytes = b""
    ) -> bytes | Path | None:
        """Segment `segment`'s bundle of the stage whose trace root is `trace_root` (bytes, or a
        file holding exactly them), or None if not held or withheld (a round's own work before its
        commit phase closes). `asker`: the requesting peer's account (20 bytes)."""
        ...


class DirectoryStageSegments:
    """Bundles as files `<root>/<round>/<hex trace root>/<segment>`, served from the file in
    chunks (a bundle holds three copies of a stage's values, so never held in memory to serve).

    Two kinds of node fill it, each with the bundle's bytes under the *stage's* trace root: the
    stage miner with its own segments, and the sender of a stage's received tensors with that
    receiver's segments, so a validator can fetch them from either (PROTOCOL.md §16.6). Fill it
    once the round's commit phase has closed: it withholds nothing itself."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    def path_for(self, round_: int, trace_root: bytes, segment: int) -> Path:
        if len(trace_root) != TRACE_ROOT_LEN or round_ < 0 or segment < 0:
            raise ValueError("a stage segment is keyed by a round, a 32-byte trace root and an index >= 0")
        return self.root / str(round_) / trace_root.hex() / str(segment)

    def put(self, round_: int, trace_root: bytes, segment: int, data: bytes) -> Path:
        """Keep `data` to serve; written to a temp file and renamed, so a half-written bundle is
        never served (a later put of the same key replaces it)."""
        path = self.path_for(round_, trace_root, segment)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".partial-")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
        return path

    def get_segment(
        self, round_: int, trace_root: bytes, segment: int, asker: bytes = b""
    ) -> Path | None:
        path = self.path_for(round_, trace_root, segment)
        return path if path.is_file() else None

    def drop_round(self, round_: int) -> None:
        """Stop serving `round_`'s segments (it ended with no open report) and free their space."""
        shutil.rmtree(self.root / str(round_), ignore_errors=True)
