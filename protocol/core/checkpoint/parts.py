"""Parts of a checkpoint: the digest list with only the tensors a check reads.

A checkpoint's hash is over its header and the digest of every tensor (checkpoint.py), so a
peer can prove a part: the header, the whole digest list and some of the tensors, each of
which must match its digest. The checks of docs/PROTOCOL.md §7 read:

- leaf 0, for the derivation: `ef` only (θ_r, the zero first moment and the RNG state are the
  validator's own; the second moment is bound by its digests through the carry hash);
- the last leaf, for the derivation: the parameters (its second moment, again, by digest);
- the end of a replayed segment: nothing in exact mode (the replay's hash decides), the
  parameters in tolerance mode (the distance is measured on them);
- the start of a replayed segment: everything.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from torch import Tensor

from protocol.core.checkpoint.format import (
    Checkpoint,
    CheckpointFormatError,
    CheckpointHeader,
    Leaves,
    checkpoint_of,
    decode_tensors,
    hash_digests,
    header_bytes,
    read_metadata,
)
from protocol.core.checkpoint.tensor_subset import (
    PREFIX_BYTES,
    SubsetError,
    SubsetLayout,
    header_length,
    parse_header,
    subset_layout,
    tensor_keys,
)
from protocol.core.crypto.hashing import Digest
from protocol.core.model.gpt import ModelConfig


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


@dataclass(frozen=True)
class ServedCheckpoint:
    """A served checkpoint, whole or a part, whose tensors all matched their digests."""

    header: CheckpointHeader
    leaves: Leaves  # every tensor's digest, held or not
    tensors: dict[str, Tensor]  # the tensors served

    @property
    def hash(self) -> Digest:
        return hash_digests("checkpoint", header_bytes(self.header), self.leaves)

    def holds(self, part: CheckpointPart) -> bool:
        return part_keys(part, self.leaves) <= set(self.tensors)

    def whole(self, cfg: ModelConfig) -> Checkpoint:
        if not self.holds(CheckpointPart.ALL):
            raise CheckpointFormatError(f"a part, not a whole checkpoint: {len(self.tensors)} of {len(self.leaves)} tensors")
        return checkpoint_of(self.header, self.tensors, cfg)


def decode_served(blob: bytes, cfg: ModelConfig) -> ServedCheckpoint:
    """Parse a served checkpoint or part of one; raise CheckpointFormatError if it is malformed,
    does not fit `cfg`, or a tensor does not match its digest."""
    header, leaves, tensors = decode_tensors(blob, cfg)
    return ServedCheckpoint(header, leaves, tensors)


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

