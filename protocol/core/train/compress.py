"""SparseLoCo-style compression: top-k per chunk, 2-bit or int8 values, error feedback.

The flat pseudo-gradient (N,) is zero-padded to C = ceil(N / chunk) chunks. In each chunk the
`topk` largest magnitudes are kept (indices sorted ascending, so the encoding is canonical),
and quantized with one float32 scale per chunk:
  - 2-bit: 4 levels (code - 1.5) * scale / 1.5, four codes packed per byte;
  - int8: code * scale / 127, codes in [-127, 127].
Error feedback: acc = ef_decay * ef + Δ; the residual acc - decompress(compress(acc)) is
carried into the next round. Every step is deterministic under the replay profile.

The update blob is safetensors bytes ("idx" int16 (C, k), "codes", "scale" float32 (C,)) plus a
strict pydantic header. `decode_update` checks every shape, dtype, range and size cap against
the model and config, rejects NaN/Inf and never unpickles.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import safetensors.torch
import torch
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from torch import Tensor

from protocol.core.checkpoint.format import MAX_HEADER_BYTES, BlobFormatError, read_safetensors
from protocol.core.crypto.hashing import Digest, blake3_hash
from protocol.core.errors import VeritrainError

_META_KEY = "veritrain"


class UpdateFormatError(VeritrainError):
    """Raised when an update blob is malformed, oversized, non-finite or does not fit the model."""


class UpdateHeader(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    format: Literal["veritrain-update"] = "veritrain-update"
    version: Literal[1] = 1
    numel: int = Field(gt=0, le=1 << 34)  # N, parameters in the model
    chunk: int = Field(gt=0, le=1 << 15)
    topk: int = Field(gt=0, le=1 << 15)
    bits: Literal[2, 8]


@dataclass(frozen=True)
class Compressed:
    header: UpdateHeader
    idx: Tensor  # (C, k) int16, strictly increasing per row
    codes: Tensor  # (C, k/4) uint8 packed 2-bit codes, or (C, k) int8
    scale: Tensor  # (C,) float32 max |value| per chunk, >= 0


def _chunks(x: Tensor, chunk: int) -> Tensor:
    c = math.ceil(x.numel() / chunk)
    padded = torch.zeros(c * chunk, dtype=torch.float32)
    padded[: x.numel()] = x
    return padded.view(c, chunk)  # (C, chunk)


def _take_padded(x: Tensor, idx: Tensor, chunk: int) -> Tensor:
    """x's values at column `idx` of each chunk (C, k), 0 past its end: what gathering from the
    zero-padded (C, chunk) view gives, without a signed padded copy of x."""
    flat = torch.arange(idx.shape[0]).unsqueeze(1) * chunk + idx  # (C, k)
    inside = flat < x.numel()
    return torch.where(inside, torch.take(x, flat.clamp_max(x.numel() - 1)), torch.zeros((), dtype=x.dtype))


def compress(x: Tensor, chunk: int, topk: int, bits: int) -> Compressed:
    """Top-k per chunk + quantization of a flat float32 vector x (N,)."""
    if bits == 2 and topk % 4:
        raise VeritrainError("2-bit packing needs topk divisible by 4")
    magnitudes = _chunks(x, chunk).abs_()  # (C, chunk): a padded copy, made absolute in place
    _, idx = torch.topk(magnitudes, topk, dim=1, sorted=False)  # (C, k)
    del magnitudes
    idx, _ = torch.sort(idx, dim=1)  # canonical order, (C, k)
    vals = _take_padded(x, idx, chunk)  # (C, k)
    scale = vals.abs().amax(dim=1)  # (C,)
    safe = torch.where(scale > 0, scale, torch.ones_like(scale)).unsqueeze(1)  # (C, 1)
    if bits == 2:
        q = torch.clamp(torch.round(vals / (safe / 1.5) + 1.5), 0, 3).to(torch.uint8)  # (C, k)
        q4 = q.view(q.shape[0], -1, 4)  # (C, k/4, 4)
        codes = q4[..., 0] | (q4[..., 1] << 2) | (q4[..., 2] << 4) | (q4[..., 3] << 6)  # (C, k/4)
    else:
        codes = torch.clamp(torch.round(vals / safe * 127), -127, 127).to(torch.int8)  # (C, k)
    header = UpdateHeader(numel=x.numel(), chunk=chunk, topk=topk, bits=2 if bits == 2 else 8)
    return Compressed(header, idx.to(torch.int16), codes.contiguous(), scale.contiguous())


def unpack_codes(c: Compressed) -> Tensor:
    """The integer codes (C, k): levels 0..3 (uint8, 2-bit) or -127..127 (int8)."""
    if c.header.bits == 2:
        packed = c.codes.unsqueeze(2)  # (C, k/4, 1)
        shifts = torch.tensor([0, 2, 4, 6], dtype=torch.uint8)  # (4,)
        return ((packed >> shifts) & 3).reshape(c.codes.shape[0], -1)  # (C, k)
    return c.codes


def dequantize(c: Compressed) -> Tensor:
    """The kept values, (C, k) float32."""
    scale = c.scale.unsqueeze(1)  # (C, 1)
    if c.header.bits == 2:
        return (unpack_codes(c).float() - 1.5) * (scale / 1.5)
    return c.codes.float() * (scale / 127)


def scatter_chunks(c: Compressed, values: Tensor) -> tuple[Tensor, Tensor]:
    """Place the kept values (C, k) at their indices: dense (N,) in the values' dtype and on
    their device, and the mask (N,) bool of coordinates this update selected."""
    h = c.header
    n_chunks = c.idx.shape[0]
    dense = torch.zeros(n_chunks, h.chunk, dtype=values.dtype, device=values.device)  # (C, chunk)
    mask = torch.zeros(n_chunks, h.chunk, dtype=torch.bool, device=values.device)  # (C, chunk)
    idx = c.idx.long().to(values.device)  # (C, k)
    dense.scatter_(1, idx, values)
    mask.scatter_(1, idx, True)
    return dense.view(-1)[: h.numel], mask.view(-1)[: h.numel]


def decompress_sparse(c: Compressed) -> tuple[Tensor, Tensor]:
    """Dense values (N,) and the mask (N,) bool of coordinates this update selected."""
    return scatter_chunks(c, dequantize(c))


def decompress(c: Compressed) -> Tensor:
    return decompress_sparse(c)[0]


def compress_with_feedback(delta: Tensor, ef: Tensor, chunk: int, topk: int, bits: int,
                           ef_decay: float, consume: bool = False) -> tuple[Compressed, Tensor]:
    """Compress ef_decay * ef + Δ; returns the compressed update and the new residual (N,).
    `consume`: Δ's buffer becomes the residual (the caller no longer needs Δ: one N fewer)."""
    acc = delta if consume else delta.clone()  # (N,)
    acc += ef * ef_decay  # Δ + ef·decay: addition commutes exactly, so the bits of ef·decay + Δ
    c = compress(acc, chunk, topk, bits)
    return c, acc.sub_(decompress(c))  # the residual, in the same buffer


def encode_update(c: Compressed) -> bytes:
    tensors = {"idx": c.idx, "codes": c.codes, "scale": c.scale}
    return safetensors.torch.save(tensors, {_META_KEY: c.header.model_dump_json()})


def update_content_hash(blob: bytes) -> Digest:
    """Content hash of the blob bytes (the chain's update_hash adds chain/contract/round/miner)."""
    return blake3_hash("update-blob", blob)


def expected_header(numel: int, chunk: int, topk: int, bits: int) -> UpdateHeader:
    return UpdateHeader(numel=numel, chunk=chunk, topk=topk, bits=2 if bits == 2 else 8)


def _check(name: str, t: Tensor, shape: tuple[int, ...], dtype: torch.dtype) -> None:
    if tuple(t.shape) != shape or t.dtype != dtype:
        raise UpdateFormatError(f"{name}: got {t.dtype}{tuple(t.shape)}, want {dtype}{shape}")


def max_update_bytes(want: UpdateHeader) -> int:
    c = math.ceil(want.numel / want.chunk)
    return c * (want.topk * 2 + want.topk + 4) + MAX_HEADER_BYTES


def decode_update(blob: bytes, want: UpdateHeader) -> Compressed:
    """Parse and strictly validate an update blob against the expected header."""
    try:
        tensors, meta = read_safetensors(blob, max_update_bytes(want))
        header = UpdateHeader.model_validate_json(meta.get(_META_KEY, ""))
    except (BlobFormatError, ValidationError) as exc:
        raise UpdateFormatError(f"bad update blob: {exc}") from exc
    if header != want:
        raise UpdateFormatError(f"update header {header} does not match the run config {want}")
    if set(tensors) != {"idx", "codes", "scale"}:
        raise UpdateFormatError(f"unexpected tensors {sorted(tensors)}")
    c, k = math.ceil(want.numel / want.chunk), want.topk
    idx, codes, scale = tensors["idx"], tensors["codes"], tensors["scale"]
    _check("idx", idx, (c, k), torch.int16)
    _check("scale", scale, (c,), torch.float32)
    if want.bits == 2:
        _check("codes", codes, (c, k // 4), torch.uint8)
    else:
        _check("codes", codes, (c, k), torch.int8)
        if bool((codes == -128).any()):
            raise UpdateFormatError("int8 codes must lie in [-127, 127]")
    if not bool(torch.isfinite(scale).all()) or bool((scale < 0).any()):
        raise UpdateFormatError("scales must be finite and non-negative (NaN/Inf rejected)")
    if bool((idx < 0).any()) or bool((idx >= want.chunk).any()):
        raise UpdateFormatError("index outside its chunk")
    if k > 1 and not bool((idx[:, 1:] > idx[:, :-1]).all()):
        raise UpdateFormatError("indices must be strictly increasing within each chunk")
    return Compressed(header, idx, codes, scale)
