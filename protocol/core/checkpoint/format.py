"""Checkpoints: the replayable training state, its content hash and its safetensors codec.

A checkpoint holds the parameters, the AdamW moments, the step, the RNG state, whether the
second moment was carried in from the miner's previous round (`warm`: then AdamW skips its
bias correction) and (at leaf 0 only) the error-feedback buffer carried into the round.

Its hash is a one-level Merkle tree: each tensor is hashed alone (dtype, shape, raw
little-endian bytes: its *digest*), and the checkpoint hash is over the header and the sorted
(key, digest) list, so it does not depend on how safetensors lays out a file, and a peer can
ship the digest list with only the tensors a check reads (`checkpoint_parts.py`). The list
travels in the file's metadata. Decoding never unpickles: it reads a size-capped safetensors
blob and a strict pydantic header, and checks every key, shape, dtype and digest against the
model and the list. The header, the digest list and the size bounds are torch-free, in
`protocol.core.checkpoint.header`.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping
from dataclasses import dataclass

import safetensors.torch
import torch
from torch import Tensor

from protocol.core.checkpoint.header import (
    MAX_HEADER_BYTES,
    RNG_STATE_BYTES,
    BlobFormatError,
    CheckpointFormatError,
    CheckpointHeader,
    Leaves,
    checkpoint_metadata,
    hash_digests,
    header_bytes,
    read_metadata,
)
from protocol.core.checkpoint.safetensors_layout import serialized, tensor_bytes
from protocol.core.crypto.hashing import Digest, StreamHasher
from protocol.core.model.gpt import ModelConfig, Params, config_hash, num_params, param_shapes


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


def tensor_digest(t: Tensor) -> Digest:
    """One tensor's hash: its dtype, shape and raw little-endian bytes (not its key)."""
    h = StreamHasher("checkpoint-tensor")
    h.update(f"{t.dtype}{tuple(t.shape)}".encode())
    h.update(tensor_bytes(t))
    return h.digest()


def digests_of(tensors: Mapping[str, Tensor]) -> Leaves:
    return {k: tensor_digest(t) for k, t in tensors.items()}


def checkpoint_leaves(c: Checkpoint) -> Leaves:
    return digests_of(_tensors(c))


def checkpoint_hash(c: Checkpoint, cfg: ModelConfig, leaves: Leaves | None = None) -> Digest:
    """`leaves`: `checkpoint_leaves(c)` when the caller has them already (one pass over the bytes)."""
    return hash_digests("checkpoint", header_bytes(_header(c, cfg)), leaves if leaves is not None else checkpoint_leaves(c))


def checkpoint_layout(c: Checkpoint, cfg: ModelConfig,
                      leaves: Leaves | None = None) -> tuple[dict[str, Tensor], dict[str, str]]:
    """The tensors and metadata `encode_checkpoint` serializes (for writers that stream them
    to a file with safetensors instead of building the bytes in memory: the same bytes)."""
    leaves = leaves if leaves is not None else checkpoint_leaves(c)
    return {k: v.contiguous() for k, v in _tensors(c).items()}, checkpoint_metadata(_header(c, cfg), leaves)


def encode_checkpoint(c: Checkpoint, cfg: ModelConfig) -> bytes:
    return b"".join(serialized(*checkpoint_layout(c, cfg)))


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


def expected_tensors(cfg: ModelConfig, has_ef: bool) -> dict[str, tuple[tuple[int, ...], torch.dtype]]:
    """Every tensor key of a checkpoint of `cfg`, with its shape and dtype."""
    f32 = torch.float32
    shapes = param_shapes(cfg)
    out = {f"{p}/{k}": (s, f32) for p in "pmv" for k, s in shapes.items()}
    out["rng"] = ((RNG_STATE_BYTES,), torch.uint8)
    if has_ef:
        out["ef"] = ((num_params(cfg),), f32)
    return out


def decode_tensors(blob: bytes, cfg: ModelConfig) -> tuple[CheckpointHeader, Leaves, dict[str, Tensor]]:
    """A served checkpoint, whole or in part: its header, the digest of every tensor, and the
    tensors it holds, each checked for shape, dtype, finiteness and against its digest. Its
    hash is `hash_digests("checkpoint", header, leaves)`. Never unpickles."""
    try:
        tensors, meta = read_safetensors(blob, max_checkpoint_bytes(cfg))
    except BlobFormatError as exc:
        raise CheckpointFormatError(f"bad checkpoint: {exc}") from exc
    header, leaves = read_metadata(meta)
    if header.model != config_hash(cfg).hex():
        raise CheckpointFormatError("checkpoint is for a different model config")
    want = expected_tensors(cfg, header.has_ef)
    if set(leaves) != set(want) or not set(tensors) <= set(want):
        extra = (set(leaves) ^ set(want)) | (set(tensors) - set(want))
        raise CheckpointFormatError(f"unexpected tensor keys: {sorted(extra)[:5]}")
    for key in tensors:
        t = _expect(tensors, key, *want[key])
        if tensor_digest(t) != leaves[key]:
            raise CheckpointFormatError(f"{key}: does not match its digest")
    return header, leaves, tensors


def decode_checkpoint(blob: bytes, cfg: ModelConfig) -> Checkpoint:
    """Parse and validate a whole checkpoint for model `cfg`; never unpickles."""
    header, leaves, tensors = decode_tensors(blob, cfg)
    if set(tensors) != set(leaves):
        raise CheckpointFormatError(f"a part, not a whole checkpoint: {len(tensors)} of {len(leaves)} tensors")
    return checkpoint_of(header, tensors, cfg)


def checkpoint_of(header: CheckpointHeader, tensors: dict[str, Tensor], cfg: ModelConfig) -> Checkpoint:
    shapes = param_shapes(cfg)
    return Checkpoint(
        step=header.step,
        params={k: tensors[f"p/{k}"] for k in shapes},
        exp_avg={k: tensors[f"m/{k}"] for k in shapes},
        exp_avg_sq={k: tensors[f"v/{k}"] for k in shapes},
        rng=tensors["rng"],
        ef=tensors["ef"] if header.has_ef else None,
        warm=header.warm,
    )
