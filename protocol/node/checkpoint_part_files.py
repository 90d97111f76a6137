"""Which part of a checkpoint a held file holds, and how to serve a part of it (the I/O half
of `protocol.core.checkpoint.parts`: only the safetensors header is read, never a tensor)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from protocol.core.checkpoint.format import MAX_HEADER_BYTES
from protocol.core.checkpoint.part_bytes import CheckpointPart, part_layout
from protocol.core.checkpoint.tensor_subset import (
    PREFIX_BYTES,
    SplicedFile,
    SubsetError,
    header_length,
    parse_header,
)


def _header(path: Path) -> tuple[dict[str, Any], int]:
    with path.open("rb") as f:
        n = header_length(f.read(PREFIX_BYTES), MAX_HEADER_BYTES)
        return parse_header(f.read(n)), n


def part_view(path: Path, part: CheckpointPart) -> Path | SplicedFile | None:
    """What to serve for `part` of the checkpoint file at `path`: the file itself for the whole
    checkpoint, else its header rewritten and the byte ranges of the part's tensors. None if
    the file does not hold that part (it is itself a smaller part) or cannot be read."""
    try:
        header, n = _header(path)
        layout = part_layout(header, n, part)
    except (OSError, SubsetError):
        return None
    return path if part is CheckpointPart.ALL else SplicedFile(layout.head, layout.ranges, path)


def holds_part(path: Path, part: CheckpointPart) -> bool:
    return part_view(path, part) is not None
