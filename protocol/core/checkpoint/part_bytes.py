"""Which tensors a part of a checkpoint holds, and a part cut from a file's bytes, without torch.

`CheckpointPart` names a part (parts.py says which checks read which), `part_keys` its tensor
keys, and `part_layout`/`part_of_blob` cut it from a whole checkpoint's (or a bigger part's)
safetensors bytes by their header alone, decoding no tensor: the p2p layer serves parts
through this module without loading torch.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Mapping
from typing import Any

from protocol.core.checkpoint.header import CheckpointFormatError, read_metadata
from protocol.core.checkpoint.tensor_subset import (
    PREFIX_BYTES,
    SubsetError,
    SubsetLayout,
    header_length,
    parse_header,
    subset_layout,
    tensor_keys,
)


class CheckpointPart(enum.StrEnum):
    ALL = "all"
    PARAMS = "params"  # the p/* tensors
    EF = "ef"  # the error-feedback buffer (leaf 0)
    HASHES = "hashes"  # no tensors: the header and digest list alone


def part_keys(part: CheckpointPart, keys: Collection[str]) -> set[str]:
    """The tensor keys `part` ships, of a checkpoint with `keys`."""
    if part is CheckpointPart.ALL:
        return set(keys)
    if part is CheckpointPart.PARAMS:
        return {k for k in keys if k.startswith("p/")}
    if part is CheckpointPart.EF:
        return {"ef"} & set(keys)
    return set()


def merge_parts(parts: Collection[CheckpointPart]) -> CheckpointPart:
    """One part that holds all of `parts` (the fewest bytes that do)."""
    wanted = set(parts) - {CheckpointPart.HASHES}
    if not wanted:
        return CheckpointPart.HASHES
    return wanted.pop() if len(wanted) == 1 else CheckpointPart.ALL


def part_layout(header: Mapping[str, Any], header_len: int, part: CheckpointPart) -> SubsetLayout:
    """How to serve `part` of a checkpoint file (or of a part that holds it) with the parsed
    safetensors header `header` of `header_len` bytes; SubsetError if it does not hold it."""
    meta = header.get("__metadata__")
    if not isinstance(meta, Mapping):
        raise SubsetError("no checkpoint metadata")
    try:
        _, leaves = read_metadata(meta)
    except CheckpointFormatError as exc:
        raise SubsetError(str(exc)) from exc
    keys = part_keys(part, leaves)
    if not keys <= tensor_keys(header):
        raise SubsetError(f"holds no {part.value} part")
    return subset_layout(header, header_len, keys)


def part_of_blob(blob: bytes, part: CheckpointPart, max_header: int) -> bytes:
    """`part` of a checkpoint held in memory (tests, the devnet's in-memory holders)."""
    n = header_length(blob[:PREFIX_BYTES], max_header)
    layout = part_layout(parse_header(blob[PREFIX_BYTES : PREFIX_BYTES + n]), n, part)
    return layout.head + b"".join(blob[at : at + size] for at, size in layout.ranges)

