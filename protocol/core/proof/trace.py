"""The trace: checkpoint hashes, losses and carry as Merkle leaves, and the checks of served leaves."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from protocol.core.checkpoint.format import (
    MAX_HEADER_BYTES,
    BlobFormatError,
    CheckpointFormatError,
    Leaves,
    hash_digests,
    read_safetensors,
    tensor_digest,
)
from protocol.core.checkpoint.part_bytes import CheckpointPart
from protocol.core.checkpoint.parts import decode_served
from protocol.core.checkpoint.safetensors_layout import serialized
from protocol.core.crypto.hashing import (
    Digest,
    MerkleProof,
    MerkleProofError,
    blake3_hash,
    decode_merkle_proof,
    merkle_proof,
    merkle_root,
    verify_merkle_proof,
)
from protocol.core.errors import VeritrainError
from protocol.core.model.gpt import (
    ModelConfig,
    num_params,
    param_shapes,
)
from protocol.core.train.compute_config import ComputeConfig
from protocol.core.train.training import Carry, zero_carry


class TraceError(VeritrainError):
    """Raised when a served trace is malformed or does not hash to the committed trace root."""


class ProofMismatch(VeritrainError):
    """Raised when a served checkpoint's Merkle proof does not lead from the checkpoint's hash,
    at the requested leaf of a trace of the configured size, to the committed trace root (or
    the checkpoint or the proof is malformed). The peer did not serve that leaf; by itself
    this is never evidence of fraud (anyone can serve garbage)."""


@dataclass(frozen=True)
class Trace:
    checkpoint_hashes: tuple[Digest, ...]  # H/k + 1 leaves
    losses: tuple[float, ...]  # H per-step losses (float32 values)
    carry_hash: Digest  # what the miner carries into round r+1 (residual, second moment)


def losses_hash(losses: Sequence[float]) -> Digest:
    return blake3_hash("losses", np.asarray(losses, dtype="<f4").tobytes())


def _carry_tensors(carry: Carry) -> dict[str, Tensor]:
    return {"residual": carry.residual} | {f"v/{k}": t for k, t in carry.second_moment.items()}


def carry_hash(carry: Carry) -> Digest:
    return carry_hash_of(tensor_digest(carry.residual), {f"v/{k}": tensor_digest(t) for k, t in carry.second_moment.items()})


def carry_hash_of(residual: bytes, second_moment: Leaves | dict[str, bytes]) -> Digest:
    """A carry's hash from digests: the residual's, and the second moment's as `v/<name>` keys
    (a checkpoint's own `v/*` digests), so a part of a checkpoint binds its carry."""
    v = {k: d for k, d in second_moment.items() if k.startswith("v/")}
    return hash_digests("carry", b"", {"residual": residual} | v)


def encode_carry(carry: Carry) -> bytes:
    """A miner's own carry between rounds, as stored in its data dir."""
    return b"".join(serialized(_carry_tensors(carry), {}))  # one copy: the bytes themselves


def decode_carry(blob: bytes, model: ModelConfig) -> Carry:
    """Parse a stored carry; raise CheckpointFormatError unless it fits the model."""
    try:
        tensors, _ = read_safetensors(blob, 2 * 4 * num_params(model) + MAX_HEADER_BYTES)
    except BlobFormatError as exc:
        raise CheckpointFormatError(f"bad carry: {exc}") from exc
    shapes = param_shapes(model)
    want = {"residual": (num_params(model),)} | {f"v/{k}": s for k, s in shapes.items()}
    if {k: tuple(t.shape) for k, t in tensors.items()} != want:
        raise CheckpointFormatError("carry does not fit the model")
    if any(t.dtype != torch.float32 for t in tensors.values()):
        raise CheckpointFormatError("carry tensors must be float32")
    return Carry(tensors["residual"], {k: tensors[f"v/{k}"] for k in shapes})


def zero_carry_hash(model: ModelConfig) -> Digest:
    """What a miner carries into its first round, or after a round it missed."""
    return carry_hash(zero_carry(model))


def trace_leaves(t: Trace) -> list[bytes]:
    return [*t.checkpoint_hashes, losses_hash(t.losses), t.carry_hash]


def trace_root(t: Trace) -> Digest:
    return merkle_root(trace_leaves(t))


def leaf_proof(t: Trace, leaf: int) -> MerkleProof:
    return merkle_proof(trace_leaves(t), leaf)


def trace_size(cfg: ComputeConfig) -> int:
    """Leaves of a trace: H/k + 1 checkpoints, the losses hash, the carry hash."""
    return cfg.n_segments + 3


def check_leaf_proof(root: bytes, leaf_index: int, n_leaves: int, leaf: bytes, proof: bytes) -> None:
    """Raise ProofMismatch unless `proof` (docs/INTEROP.md §6 encoding) shows `leaf` (the
    served checkpoint's hash) at `leaf_index` of an `n_leaves` trace whose root is `root`."""
    try:
        p = decode_merkle_proof(proof)
    except MerkleProofError as exc:
        raise ProofMismatch(f"leaf {leaf_index}: {exc}") from exc
    if p.index != leaf_index or p.size != n_leaves:
        raise ProofMismatch(f"proof is for leaf {p.index} of {p.size}, not {leaf_index} of {n_leaves}")
    try:
        verify_merkle_proof(root, leaf, p)
    except MerkleProofError as exc:
        raise ProofMismatch(f"leaf {leaf_index}: {exc}") from exc


def check_served_leaf(blob: bytes, proof: bytes, root: bytes, leaf_index: int, model: ModelConfig,
                      cfg: ComputeConfig, part: CheckpointPart = CheckpointPart.ALL) -> None:
    """Raise ProofMismatch unless `blob` is a checkpoint of `model` holding `part` (whole, or
    a part: checkpoint_parts.py) whose hash sits at checkpoint leaf `leaf_index` (0..H/k) under
    the committed trace root `root`."""
    if not 0 <= leaf_index <= cfg.n_segments:
        raise ProofMismatch(f"leaf {leaf_index} is not a checkpoint leaf (0..{cfg.n_segments})")
    try:
        served = decode_served(blob, model)
    except CheckpointFormatError as exc:
        raise ProofMismatch(f"leaf {leaf_index}: served bytes are not a checkpoint: {exc}") from exc
    if not served.holds(part):
        raise ProofMismatch(f"leaf {leaf_index}: served without its {part.value} part")
    check_leaf_proof(root, leaf_index, trace_size(cfg), served.hash, proof)


def check_trace(t: Trace, root: bytes, cfg: ComputeConfig) -> None:
    """Raise TraceError unless the trace has the configured shape and hashes to `root`."""
    if len(t.checkpoint_hashes) != cfg.n_segments + 1 or len(t.losses) != cfg.inner_steps:
        raise TraceError("trace has the wrong number of checkpoints or losses")
    if trace_root(t) != root:
        raise TraceError("served trace does not hash to the committed trace root")

