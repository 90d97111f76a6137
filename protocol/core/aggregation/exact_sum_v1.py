"""The exact-sum-v1 aggregation rule: integer sums, so the bits depend neither on the machine nor
on how the updates are grouped (PROTOCOL.md §13.4).

Each selected update, decoded exactly (`exact_v1.exact_values`, float64), is
  1. clipped to a public norm cap fixed before the round: `sum_clip_multiplier` (2) x the norm per step
     carried in θ_r's certified state (`GlobalState.step_norm`; at genesis the run config's
     `first_step_norm`, 0: no norm cap) x its verified steps, by exact-v1's float64 ops;
  2. clamped to ±2^b per coordinate (`sum_bound_bits`) and converted to fixed point with f
     fraction bits (`sum_fraction_bits`): x · 2^f is exact, the rounding to an integer is half
     to even, once;
  3. weighted by its verified steps s: a partial sum holds, per coordinate, Σ s·q over the updates
     that selected it and Σ s over the same updates, both int64.
Integer addition is associative, so partial sums merged in any grouping, by anyone, give the
flat sum's bits. No sum overflows: |s·q| <= S · 2^(b+f) per update and a round has at most
`MAX_MINERS` of them, so MAX_MINERS · S · 2^(b+f) < 2^63 (`ComputeConfig` refuses a run that
breaks it). θ_{r+1} follows from the root: Δ = Σ s·q / (Σ s · 2^f) per coordinate (0 where none
selected it), the integer's conversion to float64 rounds only beyond 2^53 and the division once,
then exact-v1's outer step in float64 and one rounding of θ (and momentum) to float32.
`exact_sum_reference.py` reproduces this in numpy, bit for bit.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor

from protocol.core.aggregation.exact_v1 import (
    F64,
    exact_values,
    lower_median,
    outer_step_exact,
    row_norms,
)
from protocol.core.train.compress import Compressed, scatter_chunks
from protocol.core.train.compute_config import ComputeConfig


@dataclass(frozen=True)
class PartialSum:
    """A node of the aggregation tree: per coordinate, Σ s·q and Σ s over the updates below it,
    and each of those updates' norm per step in leaf order (the next round's clip reference is
    their lower median, so the root must carry them up)."""

    sums: Tensor  # (N,) int64
    weights: Tensor  # (N,) int64
    step_norms: Tensor = field(default_factory=lambda: torch.zeros(0, dtype=F64))  # (leaves,) float64

    def __add__(self, other: PartialSum) -> PartialSum:
        return PartialSum(self.sums + other.sums, self.weights + other.weights,
                          torch.cat([self.step_norms, other.step_norms]))


def norm_cap(step_norm: float | None, steps: int, cfg: ComputeConfig) -> float:
    """The public norm cap of an update of `steps` steps: 0 (none) when no reference exists yet."""
    reference = cfg.first_step_norm if step_norm is None else step_norm
    return cfg.sum_clip_multiplier * reference * steps


def fixed_point(values: Tensor, cap: float, cfg: ComputeConfig, norm: float | None = None) -> Tensor:
    """One update's float64 values (N,) clipped to norm `cap` (0: unclipped), clamped to ±2^b
    and rounded to integers of 2^-f: int64 (N,). `norm`: the values' norm, when known."""
    if cap > 0:
        norm = float(row_norms(values.unsqueeze(0))[0]) if norm is None else norm
        if norm > cap:  # the scale rounds once, the product once, as exact-v1's clip
            values = values * torch.tensor(cap / norm, dtype=F64, device=values.device)
    bound = math.ldexp(1.0, cfg.sum_bound_bits)
    scaled = values.clamp(-bound, bound) * math.ldexp(1.0, cfg.sum_fraction_bits)  # a power of two: exact
    return torch.round(scaled).to(torch.int64)  # half to even; |x| <= 2^(b+f), an exact integer


def leaf(update: Compressed, steps: int, step_norm: float | None, cfg: ComputeConfig,
         device: torch.device | str = "cpu") -> tuple[PartialSum, float]:
    """The partial sum of one verified update of `steps` inner steps, and the update's norm
    (before the clip: the next round's reference is the lower median of norm / steps)."""
    dense, mask = scatter_chunks(update, exact_values(update, device))  # (N,) float64, (N,) bool
    norm = float(row_norms(dense.unsqueeze(0))[0])
    q = fixed_point(dense, norm_cap(step_norm, steps, cfg), cfg, norm)  # (N,) int64
    weight = mask.to(torch.int64) * steps  # (N,)
    return PartialSum(q * steps, weight, torch.tensor([norm / steps], dtype=F64)), norm  # one IEEE division


def merge(parts: Sequence[PartialSum]) -> PartialSum:
    """The sum of partial sums, in any order or grouping: the same bits."""
    if not parts:
        raise ValueError("nothing to merge")
    total = parts[0]
    for part in parts[1:]:
        total = total + part
    return total


def delta_of(root: PartialSum, cfg: ComputeConfig) -> Tensor:
    """Δ (N,) float64: the step-weighted mean of the selecting updates, per coordinate."""
    denominator = root.weights.to(F64) * math.ldexp(1.0, cfg.sum_fraction_bits)  # < 2^53 · 2^f: exact
    selected = root.weights > 0
    return torch.where(selected, root.sums.to(F64) / torch.where(selected, denominator, torch.ones_like(denominator)),
                       torch.zeros_like(denominator))


def step_norm_of(root: PartialSum) -> float:
    """The norm per step θ_{r+1} carries: the lower median over the root's leaves."""
    return float(lower_median(root.step_norms))


def next_from_root(theta: Tensor, momentum: Tensor | None, root: PartialSum,
                   cfg: ComputeConfig) -> tuple[Tensor, Tensor | None]:
    """The next flat θ (N,) and momentum (N,), float32 on CPU, from the tree's root."""
    device = root.sums.device
    mom = momentum.to(device=device, dtype=F64) if momentum is not None else None
    theta64, mom = outer_step_exact(theta.to(device=device, dtype=F64), mom, delta_of(root, cfg), cfg)
    return theta64.to(torch.float32).cpu(), (mom.to(torch.float32).cpu() if mom is not None else None)


def exact_sum_next(theta: Tensor, momentum: Tensor | None, updates: Sequence[Compressed], steps: Sequence[int],
                   step_norm: float | None, cfg: ComputeConfig,
                   device: torch.device | str = "cpu") -> tuple[Tensor, Tensor | None, float]:
    """The next flat θ, momentum and norm per step from verified updates (G >= 1), each of
    `steps` inner steps, as one flat sum (the bits every grouping of the same leaves gives).
    One update is dense at a time: memory O(N), whatever G."""
    root: PartialSum | None = None
    for update, s in zip(updates, steps, strict=True):
        part, _ = leaf(update, s, step_norm, cfg, device)
        root = part if root is None else root + part
    if root is None:
        raise ValueError("no updates to aggregate")
    theta, momentum = next_from_root(theta, momentum, root, cfg)
    return theta, momentum, step_norm_of(root)
