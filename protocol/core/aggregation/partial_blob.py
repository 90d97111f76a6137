"""A partial sum as served bytes (PROTOCOL.md §13.9): sparse while sparse, dense after.

Sparse holds the selected coordinates only (`idx` int32 ascending, `sums` int64, `weights`
int32: 16 bytes each); dense holds every coordinate (`sums` int64, `weights` int32: 12 bytes
each; a weight is at most MAX_MINERS · H < 2^31, which the run config checks); both carry
`norms`, the norm per step of each update below the node in leaf order (float64, finite, >= 0). The
smaller form is the only valid one, so a partial sum has exactly one encoding and its content
hash names it: a served blob in the other form, or with an unselected coordinate carrying a sum,
is refused. Decoding reads a size-capped safetensors blob (never a pickle).
"""

from __future__ import annotations

import safetensors.torch
import torch
from torch import Tensor

from protocol.core.aggregation.exact_sum_v1 import PartialSum
from protocol.core.checkpoint.format import MAX_HEADER_BYTES, read_safetensors
from protocol.core.checkpoint.header import BlobFormatError
from protocol.core.crypto.hashing import Digest, content_hash
from protocol.core.errors import VeritrainError
from protocol.core.settlement.result_inputs import MAX_MINERS

SPARSE_ENTRY_BYTES = 4 + 8 + 4  # index, sum, weight
DENSE_ENTRY_BYTES = 8 + 4  # sum, weight
_META_KEY = "veritrain-partial-sum"  # the one metadata entry: the number of coordinates


class PartialFormatError(VeritrainError):
    """Raised when served partial-sum bytes are malformed, not canonical, or for another model."""


def is_sparse(selected: int, numel: int) -> bool:
    """Whether a partial sum selecting `selected` of `numel` coordinates is served sparse."""
    return selected * SPARSE_ENTRY_BYTES < numel * DENSE_ENTRY_BYTES


def partial_bytes(selected: int, numel: int) -> int:
    """The payload bytes of a partial sum selecting `selected` coordinates (the header aside)."""
    return selected * SPARSE_ENTRY_BYTES if is_sparse(selected, numel) else numel * DENSE_ENTRY_BYTES


def max_partial_bytes(numel: int, leaves: int = MAX_MINERS) -> int:
    return numel * DENSE_ENTRY_BYTES + 8 * leaves + MAX_HEADER_BYTES


def encode_partial(part: PartialSum) -> bytes:
    numel = part.weights.shape[0]
    idx = torch.nonzero(part.weights, as_tuple=True)[0]  # ascending
    if is_sparse(idx.shape[0], numel):
        tensors = {"idx": idx.to(torch.int32), "sums": part.sums[idx].contiguous(),
                   "weights": part.weights[idx].to(torch.int32)}
    else:
        tensors = {"sums": part.sums.contiguous(), "weights": part.weights.to(torch.int32)}
    tensors["norms"] = part.step_norms.to(torch.float64).contiguous()
    return safetensors.torch.save(tensors, metadata={_META_KEY: str(numel)})


def partial_hash(blob: bytes) -> Digest:
    """The content hash a tree node is named, stored and fetched by (plain blake3, as any blob)."""
    return content_hash(blob)


def decode_partial(blob: bytes, numel: int) -> PartialSum:
    """Parse and strictly check a served partial sum of `numel` coordinates."""
    try:
        tensors, meta = read_safetensors(blob, max_partial_bytes(numel))
    except BlobFormatError as exc:
        raise PartialFormatError(f"bad partial-sum blob: {exc}") from exc
    if meta != {_META_KEY: str(numel)}:
        raise PartialFormatError(f"partial sum is not one of {numel} coordinates")
    norms = _norms(tensors.pop("norms", None))
    if set(tensors) == {"idx", "sums", "weights"}:
        part = _sparse(tensors, numel)
    elif set(tensors) == {"sums", "weights"}:
        part = _dense(tensors, numel)
    else:
        raise PartialFormatError(f"unexpected tensors {sorted(tensors)}")
    return PartialSum(part.sums, part.weights, norms)


def _norms(t: Tensor | None) -> Tensor:
    if t is None or t.dtype != torch.float64 or t.dim() != 1 or not 0 < t.shape[0] <= MAX_MINERS:
        raise PartialFormatError("norms: want float64 (leaves,), 1 <= leaves <= MAX_MINERS")
    if not (bool(torch.isfinite(t).all()) and bool((t >= 0).all())):
        raise PartialFormatError("norms must be finite and non-negative")
    return t.clone()


def _vector(tensors: dict[str, Tensor], key: str, length: int, dtype: torch.dtype) -> Tensor:
    t = tensors[key]
    if t.dtype != dtype or tuple(t.shape) != (length,):
        raise PartialFormatError(f"{key}: got {t.dtype}{tuple(t.shape)}, want {dtype}({length},)")
    return t


def _sparse(tensors: dict[str, Tensor], numel: int) -> PartialSum:
    count = tensors["idx"].shape[0] if tensors["idx"].dim() == 1 else -1
    idx = _vector(tensors, "idx", count, torch.int32).long()
    sums, weights = _vector(tensors, "sums", count, torch.int64), _vector(tensors, "weights", count, torch.int32).long()
    if not is_sparse(count, numel):
        raise PartialFormatError(f"{count} of {numel} coordinates must be served dense")
    if count and (int(idx[0]) < 0 or int(idx[-1]) >= numel or not bool((idx[1:] > idx[:-1]).all())):
        raise PartialFormatError("indices must be ascending, distinct and within the model")
    if not bool((weights > 0).all()):
        raise PartialFormatError("a listed coordinate must be selected (weight > 0)")
    out_sums, out_weights = torch.zeros(numel, dtype=torch.int64), torch.zeros(numel, dtype=torch.int64)
    out_sums[idx], out_weights[idx] = sums, weights
    return PartialSum(out_sums, out_weights)


def _dense(tensors: dict[str, Tensor], numel: int) -> PartialSum:
    sums, weights = _vector(tensors, "sums", numel, torch.int64), _vector(tensors, "weights", numel, torch.int32).long()
    if bool((weights < 0).any()) or bool((sums[weights == 0] != 0).any()):
        raise PartialFormatError("weights must be non-negative and an unselected coordinate sums to 0")
    if is_sparse(int((weights > 0).sum()), numel):
        raise PartialFormatError("a partial sum this sparse must be served sparse")
    return PartialSum(sums.clone(), weights)
