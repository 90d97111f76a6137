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

Naming a part and cutting one from a file's bytes is torch-free (`part_bytes.py`); decoding
and checking a served part's tensors is here.
"""

from __future__ import annotations

from dataclasses import dataclass

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
)
from protocol.core.checkpoint.part_bytes import CheckpointPart, part_keys
from protocol.core.crypto.hashing import Digest
from protocol.core.model.gpt import ModelConfig


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
