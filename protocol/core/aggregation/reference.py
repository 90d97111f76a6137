"""A pure numpy reference of the exact-v1 aggregation rule (PROTOCOL.md §13), written for clarity.

It reproduces `protocol.core.aggregation.exact_v1` bit for bit, so anyone can check a model hash
without torch: float64 throughout, only correctly rounded elementwise +, -, *, /, sqrt, sums
over N by a fixed pairwise tree, sums over G row by row in rank order, θ and the momentum
rounded to float32 once. No torch here, on purpose.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

F64 = NDArray[np.float64]


class RuleConfig(Protocol):
    """The aggregation settings the rule reads (`ComputeConfig` has them)."""

    @property
    def clip_multiplier(self) -> float: ...
    @property
    def trim_fraction(self) -> float: ...
    @property
    def outer_lr(self) -> float: ...
    @property
    def outer_momentum(self) -> float: ...
    @property
    def nesterov(self) -> bool: ...


@dataclass(frozen=True)
class DecodedUpdate:
    idx: NDArray[np.integer]  # (C, k) index of each kept value within its chunk
    codes: NDArray[np.integer]  # (C, k) levels 0..3 (2-bit) or -127..127 (int8)
    scale: NDArray[np.float32]  # (C,) per-chunk scale


def values(u: DecodedUpdate, bits: int) -> F64:
    """The kept values (C, k): code x scale is exact in float64, the division rounds once."""
    q = u.codes.astype(np.float64)
    scale = u.scale.astype(np.float64)[:, None]  # (C, 1)
    if bits == 2:
        return ((2.0 * q - 3.0) * scale) / 3.0
    return (q * scale) / 127.0


def densify(u: DecodedUpdate, numel: int, chunk: int, bits: int) -> tuple[F64, NDArray[np.bool_]]:
    """Dense values (N,) and the mask (N,) of the coordinates the update selected."""
    n_chunks = u.idx.shape[0]
    dense = np.zeros((n_chunks, chunk), dtype=np.float64)
    mask = np.zeros((n_chunks, chunk), dtype=bool)
    rows = np.arange(n_chunks)[:, None]  # (C, 1)
    dense[rows, u.idx] = values(u, bits)
    mask[rows, u.idx] = True
    return dense.reshape(-1)[:numel], mask.reshape(-1)[:numel]


def pairwise_sum(x: F64) -> F64:
    """Sum over the last axis: pad with zeros to a power of two, then add neighbours."""
    n = x.shape[-1]
    width = 1
    while width < n:
        width *= 2
    pad = [(0, 0)] * (x.ndim - 1) + [(0, width - n)]
    x = np.pad(x, pad)
    while x.shape[-1] > 1:
        x = x[..., 0::2] + x[..., 1::2]
    return x[..., 0]


def lower_median(x: F64) -> np.float64:
    """The middle value of the sorted x; the lower of the two middle ones for an even count."""
    return np.sort(x)[(len(x) - 1) // 2]


def row_weights(weights: Sequence[int] | None, g: int) -> F64:
    """Each row's weight: the steps it trained over the gcd of all of them (None: 1)."""
    if weights is None:
        return np.ones(g)
    return (np.asarray(weights, dtype=np.int64) // math.gcd(*weights)).astype(np.float64)


def clip(dense: F64, multiplier: float, weights: Sequence[int] | None = None) -> F64:
    """Rows whose norm exceeds multiplier x the lower median norm per weight x their weight are
    scaled down to it (weights: the steps each trained over their gcd; None: 1)."""
    norms = np.sqrt(pairwise_sum(dense * dense))  # (G,)
    w = row_weights(weights, len(norms))
    cap = lower_median(norms / w) * multiplier * w  # (G,)
    scale = np.ones_like(norms)
    over = norms > cap
    scale[over] = cap[over] / norms[over]
    return dense * scale[:, None]


def trimmed_mean(dense: F64, mask: NDArray[np.bool_], trim_fraction: float,
                 weights: Sequence[int] | None = None) -> F64:
    """Per coordinate: sort the selecting rows' values, drop floor(trim_fraction x count) at
    each end, add the rest times their row's weight from lowest to highest, divide by the kept
    weight. Weights are the steps each update trained, divided by their gcd (equal steps: 1)."""
    g = dense.shape[0]
    w = row_weights(weights, g)
    order = np.argsort(np.where(mask, dense, np.inf), axis=0, kind="stable")  # unselected last
    ordered = np.take_along_axis(np.where(mask, dense, np.inf), order, axis=0)
    row_w = w[order]  # (G, N): the weight of the row at each rank
    count = mask.sum(axis=0)  # (N,)
    trim = np.floor(count.astype(np.float64) * trim_fraction).astype(np.int64)
    total = np.zeros(dense.shape[1], dtype=np.float64)
    kept = np.zeros(dense.shape[1], dtype=np.float64)
    for rank in range(g):
        keep = (trim <= rank) & (rank < count - trim)
        total = total + np.where(keep, ordered[rank] * row_w[rank], 0.0)
        kept = kept + np.where(keep, row_w[rank], 0.0)
    return total / np.maximum(kept, 1.0)


def outer_step(theta: F64, momentum: F64 | None, delta: F64, cfg: RuleConfig) -> tuple[F64, F64 | None]:
    """θ − lr · step, with step = Δ̄ (SGD), u = μu + Δ̄ (momentum) or Δ̄ + μu (Nesterov)."""
    step = delta
    if cfg.outer_momentum > 0:
        prev = momentum if momentum is not None else np.zeros_like(delta)
        momentum = prev * cfg.outer_momentum + delta
        step = delta + momentum * cfg.outer_momentum if cfg.nesterov else momentum
    return theta - step * cfg.outer_lr, momentum


def reference_next(theta: NDArray[np.float32], momentum: NDArray[np.float32] | None,
                   updates: Sequence[DecodedUpdate], numel: int, chunk: int, bits: int,
                   cfg: RuleConfig, weights: Sequence[int] | None = None,
                   ) -> tuple[NDArray[np.float32], NDArray[np.float32] | None]:
    """The next flat θ and momentum (float32) from at least one decoded update; `weights`:
    the inner steps each trained (None: equal)."""
    pairs = [densify(u, numel, chunk, bits) for u in updates]
    dense = np.stack([d for d, _ in pairs])  # (G, N)
    mask = np.stack([m for _, m in pairs])  # (G, N)
    delta = trimmed_mean(clip(dense, cfg.clip_multiplier, weights), mask, cfg.trim_fraction, weights)
    mom = momentum.astype(np.float64) if momentum is not None else None
    new_theta, new_mom = outer_step(theta.astype(np.float64), mom, delta, cfg)
    return new_theta.astype(np.float32), new_mom.astype(np.float32) if new_mom is not None else None


def reference_step_norm(updates: Sequence[DecodedUpdate], numel: int, chunk: int, bits: int,
                        steps: Sequence[int]) -> float:
    """The norm per inner step the next state carries: the lower median of norm / steps."""
    dense = np.stack([densify(u, numel, chunk, bits)[0] for u in updates])  # (G, N)
    norms = np.sqrt(pairwise_sum(dense * dense))  # (G,)
    return float(lower_median(norms / np.asarray(steps, dtype=np.float64)))
