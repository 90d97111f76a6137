"""Robust aggregation and the outer step over the global state (docs/PROTOCOL.md §13). Pure.

`aggregate` dispatches on `cfg.aggregation`: "float32-v1" is the rule below, "exact-v1"
(`protocol.core.aggregation.exact_v1`, the default) the same rule with bits fixed on every device,
"exact-sum-v1" (`exact_sum_v1`) a clipped step-weighted integer sum whose bits do not depend on
how the updates are grouped either (an aggregation tree's partial sums add up to the flat sum).

next = outer_step(state, trimmed_mean(clip(decompress(u_i))))
  - clip: each update's L2 norm is capped at `clip_multiplier` x the median norm per step x
    its steps (a long update is never clipped for being long);
  - trimmed mean per coordinate over *only the updates that selected that coordinate*
    (top-k updates are sparse: averaging zeros in would wipe them out), dropping
    floor(trim_fraction * count) values at each end (Yin et al. 2018, "Byzantine-robust
    distributed learning", coordinate-wise trimmed mean);
  - outer step: SGD (default lr 1.0, no momentum = plain averaging) or Nesterov (DiLoCo).
The global state is θ plus the outer momentum; `global_state_hash` covers both. Run float32-v1
under the replay profile: its reductions depend on threads, ISA and device.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import safetensors.torch
import torch
from torch import Tensor

from protocol.core.aggregation.exact_sum_v1 import exact_sum_next
from protocol.core.aggregation.exact_v1 import (
    decode_exact,
    next_from_decoded,
    relative_weights,
    step_norm_exact,
)
from protocol.core.checkpoint.format import MAX_HEADER_BYTES, read_safetensors
from protocol.core.crypto.hashing import Digest, content_hash
from protocol.core.errors import VeritrainError
from protocol.core.model.gpt import (
    ModelConfig,
    Params,
    config_hash,
    flatten,
    init_params,
    num_params,
    param_shapes,
    unflatten,
)
from protocol.core.train.compress import (
    Compressed,
    decode_update,
    decompress_sparse,
    expected_header,
)
from protocol.core.train.compute_config import ComputeConfig


class StateFormatError(VeritrainError):
    """Raised when served global-state bytes are malformed or do not fit the model."""


@dataclass(frozen=True)
class GlobalState:
    params: Params  # θ, name -> float32 tensor
    momentum: Tensor | None  # (N,) outer momentum buffer, None without momentum
    # the lower median norm per inner step of the updates that formed θ (None at genesis): the
    # public reference of the next round's over-norm test, so it never depends on which miners
    # a validator scored
    step_norm: float | None = None


def genesis_state(model: ModelConfig, cfg: ComputeConfig, seed: int = 0, params: Params | None = None) -> GlobalState:
    """Round 0's state: `params` (a checkpoint's θ, already checked against `model`) or, without
    them, `init_params(model, seed)`; the outer momentum starts at zero either way."""
    momentum = torch.zeros(num_params(model)) if cfg.outer_momentum > 0 else None
    return GlobalState(params if params is not None else init_params(model, seed), momentum)


def _state_tensors(s: GlobalState) -> dict[str, Tensor]:
    out = {f"p/{k}": v for k, v in s.params.items()}
    if s.momentum is not None:
        out["momentum"] = s.momentum
    if s.step_norm is not None:
        out["step_norm"] = torch.tensor([s.step_norm], dtype=torch.float64)
    return out


STATE_FORMAT_KEY = "veritrain-state"  # the one metadata entry: the model config's hash


def global_state_hash(s: GlobalState, model: ModelConfig) -> Digest:
    """The model hash attested on chain: plain blake3 of the encoded state (θ and the outer
    optimizer state). So the state is a content-addressed blob: a node that joins late asks
    peers for it by the attested hash and checks it like any other blob."""
    return encoded_state(s, model)[1]


def encoded_state(s: GlobalState, model: ModelConfig) -> tuple[bytes, Digest]:
    """(the state's bytes as served, their hash): one encoding for both."""
    blob = encode_state(s, model)
    return blob, content_hash(blob)


def state_metadata(model: ModelConfig, stage: tuple[int, int] | None = None) -> dict[str, str]:
    """The state blob's one metadata entry: the model config's hash, and for stage s of S a
    `:stage s/S` suffix. One entry, because safetensors writes a map of several in a random order."""
    suffix = f":stage {stage[0]}/{stage[1]}" if stage is not None else ""
    return {STATE_FORMAT_KEY: config_hash(model).hex() + suffix}


def encode_state(s: GlobalState, model: ModelConfig, metadata: dict[str, str] | None = None) -> bytes:
    """`metadata`: `state_metadata` of a stage (`pipeline/staged_state.py`); None: the whole model's."""
    # deterministic bytes: safetensors orders tensors by dtype then name, and a one-entry
    # metadata map has a single order (checked across processes in tests/core)
    tensors = {k: v.contiguous() for k, v in _state_tensors(s).items()}
    return safetensors.torch.save(tensors, metadata=metadata if metadata is not None else state_metadata(model))


def decode_state(blob: bytes, model: ModelConfig, expected_hash: bytes, shapes: dict[str, tuple[int, ...]] | None = None,
                 metadata: dict[str, str] | None = None) -> GlobalState:
    """Parse served state bytes; they must hash to the attested hash and fit the model (or the
    stage's `shapes` and `metadata`, as `staged_state.decode_stage` passes them)."""
    if content_hash(blob) != expected_hash:
        raise StateFormatError("served global state does not hash to the attested model hash")
    shapes = shapes if shapes is not None else param_shapes(model)
    size = sum(math.prod(s) for s in shapes.values())
    tensors, meta = read_safetensors(blob, 2 * 4 * size + 8 + MAX_HEADER_BYTES)
    if meta != (metadata if metadata is not None else state_metadata(model)):
        raise StateFormatError("global state is for another model configuration or stage")
    keys = {f"p/{k}" for k in shapes}
    if not keys <= set(tensors) or set(tensors) - keys - {"momentum", "step_norm"}:
        raise StateFormatError("global state has unexpected tensor keys")
    params = {k: tensors[f"p/{k}"] for k in shapes}
    if any(tuple(params[k].shape) != s or params[k].dtype != torch.float32 for k, s in shapes.items()):
        raise StateFormatError("global state tensor has the wrong shape or dtype")
    momentum = tensors.get("momentum")
    if momentum is not None and (momentum.shape != (size,) or momentum.dtype != torch.float32):
        raise StateFormatError("outer momentum has the wrong shape or dtype")
    return GlobalState(params, momentum, _step_norm(tensors.get("step_norm")))


def _step_norm(t: Tensor | None) -> float | None:
    if t is None:
        return None
    if t.shape != (1,) or t.dtype != torch.float64 or not (bool(torch.isfinite(t).all()) and float(t[0]) >= 0):
        raise StateFormatError("the state's norm per step is not one finite non-negative float64")
    return float(t[0])


def clip_updates(dense: Tensor, multiplier: float, steps: Sequence[int] | None = None) -> Tensor:
    """Scale rows of (G, N) so that no row's norm exceeds multiplier x the median norm per
    step x its steps (`relative_weights`; None: equal)."""
    norms = torch.linalg.vector_norm(dense, dim=1)  # (G,)
    w = torch.tensor(relative_weights(steps) if steps else [1] * len(norms), dtype=norms.dtype)  # (G,)
    cap = multiplier * (norms / w).median() * w  # (G,)
    scale = torch.where(norms > cap, cap / norms.clamp_min(1e-30), torch.ones_like(norms))  # (G,)
    return dense * scale.unsqueeze(1)  # (G, N)


def sparse_trimmed_mean(dense: Tensor, mask: Tensor, trim_fraction: float,
                        weights: Sequence[int] | None = None) -> Tensor:
    """Per-coordinate trimmed mean of (G, N) over the rows whose mask is set, kept values
    weighted by `relative_weights` of the steps trained (None: equal); 0 where none."""
    filled = torch.where(mask, dense, torch.full_like(dense, float("inf")))  # (G, N)
    ordered, order = torch.sort(filled, dim=0, stable=True)  # unselected (inf) sink to the end
    count = mask.sum(dim=0)  # (N,)
    trim = torch.floor(count.double() * trim_fraction).long()  # (N,)
    rank = torch.arange(dense.shape[0]).unsqueeze(1)  # (G, 1)
    keep = (rank >= trim) & (rank < count - trim)  # (G, N)
    if weights is None or len(set(weights)) == 1:  # equal work: today's float32 bits
        total = torch.where(keep, ordered, torch.zeros_like(ordered)).sum(dim=0)  # (N,)
        return total / keep.sum(dim=0).clamp_min(1)  # (N,)
    row_w = torch.tensor(relative_weights(weights), dtype=dense.dtype)[order]  # (G, N)
    kept_w = torch.where(keep, row_w, torch.zeros_like(row_w))  # (G, N)
    return (torch.where(keep, ordered, torch.zeros_like(ordered)) * kept_w).sum(dim=0) / kept_w.sum(dim=0).clamp_min(1)


def outer_step(state: GlobalState, delta: Tensor, cfg: ComputeConfig) -> GlobalState:
    """θ ← θ − lr · step, with step = Δ̄ (SGD), u (momentum) or Δ̄ + μu (Nesterov)."""
    momentum = state.momentum
    step = delta  # (N,)
    if cfg.outer_momentum > 0:
        prev = momentum if momentum is not None else torch.zeros_like(delta)
        momentum = prev * cfg.outer_momentum + delta  # (N,)
        step = delta + cfg.outer_momentum * momentum if cfg.nesterov else momentum
    theta = flatten(state.params) - cfg.outer_lr * step  # (N,)
    params: Params = {}
    offset = 0
    for name, t in state.params.items():
        params[name] = theta[offset : offset + t.numel()].reshape(t.shape).clone()
        offset += t.numel()
    return GlobalState(params, momentum, state.step_norm)


def decode_updates(blobs: Sequence[bytes], model: ModelConfig, cfg: ComputeConfig,
                   numel: int | None = None) -> list[Compressed]:
    """Parse and validate update blobs against the run's header (of `numel` values: a pipeline
    stage's; None: the whole model's)."""
    want = expected_header(num_params(model) if numel is None else numel, cfg.chunk, cfg.topk, cfg.bits)
    return [decode_update(b, want) for b in blobs]


def decode_all(blobs: Sequence[bytes], model: ModelConfig, cfg: ComputeConfig,
               numel: int | None = None) -> tuple[Tensor, Tensor]:
    """Decode validated update blobs into dense (G, N) values and (G, N) selection masks."""
    pairs = [decompress_sparse(c) for c in decode_updates(blobs, model, cfg, numel)]
    return torch.stack([d for d, _ in pairs]), torch.stack([m for _, m in pairs])


def aggregate(state: GlobalState, blobs: Sequence[bytes], model: ModelConfig,
              cfg: ComputeConfig, steps: Sequence[int] | None = None) -> GlobalState:
    """The next global state from the accepted updates (in any order: the result is the same),
    each weighted by the inner steps it trained (`steps`, one per blob; None: all H). The new
    state carries their lower median norm per step, computed exactly whatever the rule. `state`
    may be a pipeline stage's slice (`staged_state.stage_part`): its updates then cover its values."""
    if not blobs:
        return state
    if steps is not None and len(steps) != len(blobs):
        raise ValueError(f"{len(steps)} step counts for {len(blobs)} updates")
    shapes = {k: tuple(v.shape) for k, v in state.params.items()}
    numel = sum(v.numel() for v in state.params.values())
    if cfg.aggregation == "exact-sum-v1":  # streamed: one dense update at a time
        theta, momentum, step_norm = exact_sum_next(flatten(state.params), state.momentum,
                                                    decode_updates(blobs, model, cfg, numel),
                                                    steps or [cfg.inner_steps] * len(blobs), state.step_norm, cfg)
        return GlobalState(unflatten(theta, shapes), momentum, step_norm)
    dense64, mask64 = decode_exact(decode_updates(blobs, model, cfg, numel))  # (G, N) float64, (G, N)
    step_norm = step_norm_exact(dense64, steps or [cfg.inner_steps] * len(blobs))
    if cfg.aggregation == "exact-v1":
        theta, momentum = next_from_decoded(flatten(state.params), state.momentum, dense64, mask64, cfg, steps)
        return GlobalState(unflatten(theta, shapes), momentum, step_norm)
    dense, mask = decode_all(blobs, model, cfg, numel)  # (G, N), (G, N)
    clipped = clip_updates(dense, cfg.clip_multiplier, steps)  # (G, N)
    nxt = outer_step(state, sparse_trimmed_mean(clipped, mask, cfg.trim_fraction, steps), cfg)
    return GlobalState(nxt.params, nxt.momentum, step_norm)
