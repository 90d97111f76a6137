"""Checkpoints: the replayable training state, its content hash and its safetensors codec.

A checkpoint holds the parameters, the AdamW moments, the step, the RNG state, whether the
second moment was carried in from the miner's previous round (`warm`: then AdamW skips its
bias correction) and (at leaf 0 only) the error-feedback buffer carried into the round. Its hash is over a canonical framing
of the header and every tensor (sorted keys, dtype, shape, raw little-endian bytes), so it
does not depend on how safetensors lays out a file. Decoding never unpickles: it reads a
size-capped safetensors blob and a strict pydantic header, and checks every key, shape and
dtype against the model.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from typing import Literal

import safetensors.torch
import torch
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from torch import Tensor

from protocol.core.errors import VeritrainError
from protocol.core.hashing import Digest, StreamHasher
from protocol.core.model import ModelConfig, Params, config_hash, num_params, param_shapes

RNG_STATE_BYTES = 5056  # torch CPU generator (mt19937) state size
MAX_HEADER_BYTES = 1 << 20  # a safetensors JSON header larger than 1 MiB is refused
_META_KEY = "veritrain"


class CheckpointFormatError(VeritrainError):
    """Raised when checkpoint bytes are malformed, too large, or do not fit the model."""


class BlobFormatError(VeritrainError):
    """Raised when a safetensors blob (checkpoint or update) is malformed or over its size cap."""


class CheckpointHeader(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    format: Literal["veritrain-checkpoint"] = "veritrain-checkpoint"
    version: Literal[2] = 2
    step: int = Field(ge=0, le=10**9)
    model: str = Field(pattern=r"^[0-9a-f]{64}$")  # hex model config hash
    has_ef: bool
    warm: bool


@dataclass(frozen=True)
class Checkpoint:
    step: int
    params: Params  # name -> float32 tensor
    exp_avg: Params  # AdamW first moment
    exp_avg_sq: Params  # AdamW second moment
    rng: Tensor  # (5056,) uint8 generator state
    ef: Tensor | None  # (N,) float32 error-feedback buffer, leaf 0 only
    warm: bool = False  # exp_avg_sq was carried in from the previous round (training.Carry)


def _tensors(c: Checkpoint) -> dict[str, Tensor]:
    out = {f"p/{k}": v for k, v in c.params.items()}
    out |= {f"m/{k}": v for k, v in c.exp_avg.items()}
    out |= {f"v/{k}": v for k, v in c.exp_avg_sq.items()}
    out["rng"] = c.rng
    if c.ef is not None:
        out["ef"] = c.ef
    return out


def _header(c: Checkpoint, cfg: ModelConfig) -> CheckpointHeader:
    return CheckpointHeader(step=c.step, model=config_hash(cfg).hex(), has_ef=c.ef is not None,
                            warm=c.warm)


def hash_tensors(domain: str, header: bytes, tensors: dict[str, Tensor]) -> Digest:
    """Canonical content hash of a header and named tensors (sorted by name)."""
    h = StreamHasher(domain)
    h.update(header)
    for key in sorted(tensors):
        t = tensors[key].contiguous()
        h.update(key.encode())
        h.update(f"{t.dtype}{tuple(t.shape)}".encode())
        h.update(memoryview(t.view(torch.uint8).reshape(-1).numpy()))  # type: ignore[arg-type]
    return h.digest()


def checkpoint_hash(c: Checkpoint, cfg: ModelConfig) -> Digest:
    return hash_tensors("checkpoint", _header(c, cfg).model_dump_json().encode(), _tensors(c))


def checkpoint_layout(c: Checkpoint, cfg: ModelConfig) -> tuple[dict[str, Tensor], dict[str, str]]:
    """The tensors and metadata `encode_checkpoint` serializes (for writers that stream them
    to a file with safetensors instead of building the bytes in memory: the same bytes)."""
    return {k: v.contiguous() for k, v in _tensors(c).items()}, {_META_KEY: _header(c, cfg).model_dump_json()}


def encode_checkpoint(c: Checkpoint, cfg: ModelConfig) -> bytes:
    return safetensors.torch.save(*checkpoint_layout(c, cfg))


def read_safetensors(blob: bytes, max_bytes: int) -> tuple[dict[str, Tensor], dict[str, str]]:
    """Tensors and metadata of a safetensors blob, refusing oversized or malformed input."""
    if len(blob) > max_bytes:
        raise BlobFormatError(f"blob of {len(blob)} bytes exceeds the cap of {max_bytes}")
    if len(blob) < 8:
        raise BlobFormatError("blob too short for a safetensors header")
    (n,) = struct.unpack("<Q", blob[:8])
    if n > min(MAX_HEADER_BYTES, len(blob) - 8):
        raise BlobFormatError(f"safetensors header length {n} is out of bounds")
    try:
        header = json.loads(blob[8 : 8 + n])
        meta = header.get("__metadata__") or {}
        tensors = safetensors.torch.load(blob)
    except (ValueError, UnicodeDecodeError, AttributeError, safetensors.SafetensorError) as exc:
        raise BlobFormatError(f"malformed safetensors blob: {exc}") from exc
    if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
        raise BlobFormatError("safetensors metadata must map strings to strings")
    return tensors, meta


def max_checkpoint_bytes(cfg: ModelConfig) -> int:
    n = num_params(cfg)
    return 4 * n * 4 + RNG_STATE_BYTES + MAX_HEADER_BYTES  # p, m, v, ef + rng + header


def _expect(tensors: dict[str, Tensor], key: str, shape: tuple[int, ...], dtype: torch.dtype) -> Tensor:
    t = tensors[key]
    if tuple(t.shape) != shape or t.dtype != dtype:
        raise CheckpointFormatError(f"{key}: got {t.dtype}{tuple(t.shape)}, want {dtype}{shape}")
    if t.is_floating_point() and not bool(torch.isfinite(t).all()):
        raise CheckpointFormatError(f"{key}: NaN or Inf")
    return t


def decode_checkpoint(blob: bytes, cfg: ModelConfig) -> Checkpoint:
    """Parse and validate a checkpoint for model `cfg`; never unpickles."""
    try:
        tensors, meta = read_safetensors(blob, max_checkpoint_bytes(cfg))
        header = CheckpointHeader.model_validate_json(meta.get(_META_KEY, ""))
    except (BlobFormatError, ValidationError) as exc:
        raise CheckpointFormatError(f"bad checkpoint: {exc}") from exc
    if header.model != config_hash(cfg).hex():
        raise CheckpointFormatError("checkpoint is for a different model config")
    shapes = param_shapes(cfg)
    want = {f"{p}/{k}" for p in "pmv" for k in shapes} | {"rng"} | ({"ef"} if header.has_ef else set())
    if set(tensors) != want:
        raise CheckpointFormatError(f"unexpected tensor keys: {sorted(set(tensors) ^ want)[:5]}")
    f32 = torch.float32
    return Checkpoint(
        step=header.step,
        params={k: _expect(tensors, f"p/{k}", s, f32) for k, s in shapes.items()},
        exp_avg={k: _expect(tensors, f"m/{k}", s, f32) for k, s in shapes.items()},
        exp_avg_sq={k: _expect(tensors, f"v/{k}", s, f32) for k, s in shapes.items()},
        rng=_expect(tensors, "rng", (RNG_STATE_BYTES,), torch.uint8),
        ef=_expect(tensors, "ef", (num_params(cfg),), f32) if header.has_ef else None,
        warm=header.warm,
    )
