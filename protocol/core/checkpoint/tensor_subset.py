"""A safetensors file holding some of another's tensors, laid out without decoding any tensor.

A checkpoint part (checkpoint_parts.py) is served as a safetensors file with the same metadata
and a subset of the tensors. Its header is rewritten here and its data are byte ranges of the
original, so a holder streams a part straight from the file it keeps: nothing is decoded,
nothing held whole in memory. Pure and torch-free: the caller reads the header and the ranges.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from protocol.core.errors import VeritrainError

PREFIX_BYTES = 8  # the little-endian u64 header length


def frame_header(header: Mapping[str, Any]) -> bytes:
    """u64le length ‖ the header JSON, padded with spaces to 8 bytes."""
    body = json.dumps(header, separators=(",", ":")).encode()
    body += b" " * (-len(body) % 8)
    return struct.pack("<Q", len(body)) + body


class SubsetError(VeritrainError):
    """Raised when a safetensors header is malformed or lacks a tensor asked for."""


@dataclass(frozen=True)
class SubsetLayout:
    """A subset file: `head` (length + JSON header), then each (offset, length) byte range of
    the original file, in order."""

    head: bytes
    ranges: tuple[tuple[int, int], ...]

    @property
    def size(self) -> int:
        return len(self.head) + sum(n for _, n in self.ranges)


@dataclass(frozen=True)
class SplicedFile(SubsetLayout):
    """A `SubsetLayout` of the file at `path`: what a holder serves for a part of a file it
    keeps, streamed without being copied (a checkpoint part: checkpoint_parts.py)."""

    path: Path


def header_length(first8: bytes, max_header: int) -> int:
    if len(first8) != PREFIX_BYTES:
        raise SubsetError("too short for a safetensors header")
    (n,) = struct.unpack("<Q", first8)
    if n > max_header:
        raise SubsetError(f"safetensors header of {n} bytes is over the cap of {max_header}")
    return int(n)


def parse_header(raw: bytes) -> dict[str, Any]:
    try:
        header = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise SubsetError(f"malformed safetensors header: {exc}") from exc
    if not isinstance(header, dict):
        raise SubsetError("a safetensors header is a JSON object")
    return header


def tensor_keys(header: Mapping[str, Any]) -> set[str]:
    return {k for k in header if k != "__metadata__"}


def subset_layout(header: Mapping[str, Any], header_len: int, keys: Collection[str]) -> SubsetLayout:
    """The layout of a file with the tensors `keys` of the file whose parsed header is
    `header`, `header_len` bytes long (its data start right after it). Tensors keep their order."""
    missing = set(keys) - tensor_keys(header)
    if missing:
        raise SubsetError(f"not held: {sorted(missing)[:5]}")
    data_start = PREFIX_BYTES + header_len
    entries = sorted(((k, header[k]) for k in keys), key=lambda kv: _offsets(kv)[0])
    out: dict[str, Any] = {}
    if "__metadata__" in header:
        out["__metadata__"] = header["__metadata__"]
    ranges, at = [], 0
    for key, info in entries:
        start, end = _offsets((key, info))
        out[key] = {**info, "data_offsets": [at, at + end - start]}
        ranges.append((data_start + start, end - start))
        at += end - start
    return SubsetLayout(frame_header(out), tuple(ranges))


def _offsets(kv: tuple[str, Any]) -> tuple[int, int]:
    key, info = kv
    try:
        start, end = info["data_offsets"]
        if not (isinstance(start, int) and isinstance(end, int) and 0 <= start <= end):
            raise ValueError("bad offsets")
    except (TypeError, KeyError, ValueError) as exc:
        raise SubsetError(f"{key}: bad data_offsets") from exc
    return start, end

