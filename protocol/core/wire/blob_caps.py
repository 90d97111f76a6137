"""Size caps per blob kind, from the model and compute configs (docs/INTEROP.md §5, §7).

A node refuses a fetched blob whose announced length is over its kind's cap before it takes a
byte of it (docs/INTEROP.md, blob protocol). Each cap is the largest blob an honest node of the
run encodes, worked out from the codecs' own layouts (safetensors, the envelope header), plus a
modest margin for other writers: honest blobs of every preset fit, and a hostile server cannot
make a node take much more than the largest honest one. `veritrain deploy` records them in the
deployment file (`blob_caps`), where foreign peers read them.
"""

from __future__ import annotations

import math
from enum import StrEnum
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, PositiveInt

if TYPE_CHECKING:
    from protocol.core.model.config import ModelConfig
    from protocol.core.train.compute_config import ComputeConfig

MARGIN_DIVISOR = 50  # caps are the computed bound + 2% ...
SLACK_BYTES = 64 * 1024  # ... + 64 KiB: another writer's safetensors header or JSON spacing
# safetensors header entry for one tensor, names excluded: quotes, keys, dtype and the two
# data offsets (u64 decimals); each dimension adds at most 20 digits and a comma
_ENTRY_BYTES = 96
_DIM_BYTES = 21
_METADATA_BYTES = 512  # every metadata map we write is one key and <= 200 bytes of escaped JSON
_LONGEST_FLOAT = -2.2250738585072014e-308  # 24 characters as JSON, the most a float64 takes


class BlobKind(StrEnum):
    """What a fetch is for; each value names a `BlobCaps` field."""

    UPDATE = "update"  # a submission envelope: header (trace) + compressed update (envelope.py)
    CHECKPOINT = "checkpoint"  # a trace checkpoint, leaf 0 with the error-feedback buffer (checkpoint.py)
    CARRY = "carry"  # what a miner carries between rounds (proof.encode_carry; kept locally today)
    STATE = "state"  # the global state θ (+ outer momentum), addressed by the model hash (aggregate.py)
    WITNESS_BUNDLE = "witness_bundle"  # a validator's witnesses, 100 bytes per column it checked (witness_bundle.py)
    PARTIAL = "partial"  # a node of the aggregation tree: an exact-sum-v1 partial sum (partial_blob.py)


class BlobCaps(BaseModel):
    """The most bytes a node accepts for one blob of each kind."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    update: PositiveInt
    checkpoint: PositiveInt
    carry: PositiveInt
    state: PositiveInt
    witness_bundle: PositiveInt
    partial: PositiveInt | None = None  # deployment files older than the aggregation tree lack it

    def of(self, kind: BlobKind) -> int:
        return int(getattr(self, kind.value) or 0)  # an unrecorded cap admits nothing

    def below(self, other: BlobCaps) -> list[BlobKind]:
        """The kinds whose cap here is smaller than in `other`."""
        return [k for k in BlobKind if self.of(k) < other.of(k)]


def with_margin(bound: int) -> int:
    return bound + bound // MARGIN_DIVISOR + SLACK_BYTES


def safetensors_bound(tensors: list[tuple[str, int, int]], metadata: bool) -> int:
    """Most bytes a safetensors file of these (name, data bytes, ndim) tensors takes: the u64
    header length, the JSON header (padded to 8 bytes) and the data."""
    header = 2 + sum(len(name) + _ENTRY_BYTES + _DIM_BYTES * ndim for name, _, ndim in tensors)
    header += _METADATA_BYTES if metadata else 0
    return 8 + header + 7 + sum(n for _, n, _ in tensors)


def _params(prefix: str, shapes: dict[str, tuple[int, ...]]) -> list[tuple[str, int, int]]:
    return [(f"{prefix}/{k}", 4 * math.prod(s), len(s)) for k, s in shapes.items()]


def checkpoint_bound(shapes: dict[str, tuple[int, ...]], n: int, rng_bytes: int) -> int:
    """θ, both AdamW moments, the RNG state and (leaf 0) the error-feedback buffer."""
    tensors = [t for p in "pmv" for t in _params(p, shapes)] + [("rng", rng_bytes, 1), ("ef", 4 * n, 1)]
    return safetensors_bound(tensors, metadata=True)


def carry_bound(shapes: dict[str, tuple[int, ...]], n: int) -> int:
    """The error-feedback residual and the AdamW second moment."""
    return safetensors_bound([("residual", 4 * n, 1), *_params("v", shapes)], metadata=False)


def state_bound(shapes: dict[str, tuple[int, ...]], n: int, momentum: bool) -> int:
    """θ and, when the outer step has momentum, its buffer."""
    tensors = _params("p", shapes) + ([("momentum", 4 * n, 1)] if momentum else [])
    return safetensors_bound(tensors, metadata=True)


def update_bound(n: int, chunk: int, topk: int, bits: int) -> int:
    """The compressed update: int16 indices, packed 2-bit or int8 codes, a float32 scale per chunk."""
    c = math.ceil(n / chunk)
    codes = c * (topk // 4 if bits == 2 else topk)
    return safetensors_bound([("idx", 2 * c * topk, 2), ("codes", codes, 2), ("scale", 4 * c, 1)], metadata=True)


def envelope_header_bound(inner_steps: int, n_segments: int) -> int:
    """The envelope's magic, length and header JSON with every field at its longest: a loss per
    step and a checkpoint hash per leaf of the longest trace the run allows."""
    from protocol.core.proof.envelope_header import MAGIC, EnvelopeHeader

    widest = "0x" + "f" * 40
    header = EnvelopeHeader(
        chain_id=2**63 - 1, contract=widest, round=2**63 - 1, miner=widest,
        checkpoint_hashes=["f" * 64] * (n_segments + 1), losses=[_LONGEST_FLOAT] * inner_steps,
        carry_hash="f" * 64, update_size=2**40 - 1,
    )
    return len(MAGIC) + 4 + len(header.model_dump_json())


def blob_caps(model: ModelConfig, compute: ComputeConfig) -> BlobCaps:
    """The caps of a run of `model` under `compute` (torch-free: shapes from the config's `layout`)."""
    # imported here: loading a deployment file (which holds a BlobCaps) stays lean
    from protocol.core.checkpoint.header import RNG_STATE_BYTES
    from protocol.core.model.config import layout, layout_size
    from protocol.core.proof.witness_bundle import ENTRY_BYTES
    from protocol.core.settlement.result_inputs import MAX_MINERS

    shapes, n = layout(model), layout_size(model)
    update = update_bound(n, compute.chunk, compute.topk, compute.bits)
    return BlobCaps(
        update=with_margin(envelope_header_bound(compute.inner_steps, compute.n_segments) + update),
        checkpoint=with_margin(checkpoint_bound(shapes, n, RNG_STATE_BYTES)),
        carry=with_margin(carry_bound(shapes, n)),
        state=with_margin(state_bound(shapes, n, compute.outer_momentum > 0)),
        witness_bundle=MAX_MINERS * ENTRY_BYTES,  # exact: an entry for each column, at most
        partial=with_margin(partial_bound(n, MAX_MINERS)),
    )


def partial_bound(n: int, leaves: int) -> int:
    """A partial sum served dense (the larger form): int64 sums, int32 weights, a float64 norm
    per step for each update below it (partial_blob.py)."""
    return safetensors_bound([("sums", 8 * n, 1), ("weights", 4 * n, 1), ("norms", 8 * leaves, 1)], metadata=True)
