"""A pure numpy reference of the exact-sum-v1 rule (PROTOCOL.md §13.4), written for clarity.

It reproduces `protocol.core.aggregation.exact_sum_v1` bit for bit without torch: each update is
clipped to the public norm cap, clamped to ±2^b, rounded half to even to integers of 2^-f,
weighted by its steps and summed in int64 with the selecting steps beside it; Δ is the sum over
the steps times 2^f, then the outer step in float64 and one rounding to float32.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from protocol.core.aggregation.reference import (
    F64,
    DecodedUpdate,
    RuleConfig,
    densify,
    outer_step,
    pairwise_sum,
)

I64 = NDArray[np.int64]


class SumConfig(RuleConfig, Protocol):
    """The settings exact-sum-v1 reads beyond exact-v1's (`ComputeConfig` has them)."""

    @property
    def sum_fraction_bits(self) -> int: ...
    @property
    def sum_bound_bits(self) -> int: ...
    @property
    def first_step_norm(self) -> float: ...
    @property
    def sum_clip_multiplier(self) -> float: ...


def reference_leaf(values: F64, mask: NDArray[np.bool_], steps: int, step_norm: float | None,
                   cfg: SumConfig) -> tuple[I64, I64]:
    """One update's (Σ s·q, Σ s) per coordinate."""
    cap = cfg.sum_clip_multiplier * (cfg.first_step_norm if step_norm is None else step_norm) * steps
    norm = math.sqrt(float(pairwise_sum(values * values)))
    if cap > 0 and norm > cap:
        values = values * (cap / norm)
    bound = math.ldexp(1.0, cfg.sum_bound_bits)
    q = np.rint(np.clip(values, -bound, bound) * math.ldexp(1.0, cfg.sum_fraction_bits)).astype(np.int64)
    return q * steps, mask.astype(np.int64) * steps


def reference_sum_next(theta: NDArray[np.float32], momentum: NDArray[np.float32] | None,
                       updates: Sequence[DecodedUpdate], steps: Sequence[int], step_norm: float | None,
                       numel: int, chunk: int, bits: int, cfg: SumConfig,
                       ) -> tuple[NDArray[np.float32], NDArray[np.float32] | None]:
    """The next flat θ and momentum (float32) from at least one decoded update, as one flat sum."""
    sums = np.zeros(numel, dtype=np.int64)
    weights = np.zeros(numel, dtype=np.int64)
    for u, s in zip(updates, steps, strict=True):
        part_sum, part_weight = reference_leaf(*densify(u, numel, chunk, bits), s, step_norm, cfg)
        sums += part_sum
        weights += part_weight
    denominator = weights.astype(np.float64) * math.ldexp(1.0, cfg.sum_fraction_bits)
    delta = np.where(weights > 0, sums.astype(np.float64) / np.where(weights > 0, denominator, 1.0), 0.0)
    mom = momentum.astype(np.float64) if momentum is not None else None
    new_theta, new_mom = outer_step(theta.astype(np.float64), mom, delta, cfg)
    return new_theta.astype(np.float32), new_mom.astype(np.float32) if new_mom is not None else None
