"""Capacity-scaled work (docs/PROTOCOL.md §7.8): how many inner steps a miner trains this round.

A miner measures how long one inner step takes on its machine and trains as many steps as fit
in the part of the commit window it plans to use, a multiple of k between the run's minimum
and H. A fast machine trains H as before; a slow one trains fewer instead of missing the
round. Pay and aggregation weight follow the steps trained (validator/scoring.py,
core/exact_aggregate.py), so a short round earns less but still counts.
"""

from __future__ import annotations

import math

from protocol.core.errors import ConfigError
from protocol.core.train.compute_config import ComputeConfig


def steps_for_window(cfg: ComputeConfig, seconds_per_step: float, seconds: float) -> int:
    """The most inner steps that fit in `seconds` at `seconds_per_step`: a multiple of k in
    [cfg.min_steps, H]. A machine too slow for even the minimum trains the minimum (it may
    still make the deadline: the window's margin is the miner's, not the chain's)."""
    if not math.isfinite(seconds_per_step) or seconds_per_step <= 0:
        raise ConfigError(f"seconds per step must be positive, got {seconds_per_step}")
    fit = int(max(seconds, 0.0) / seconds_per_step) // cfg.checkpoint_every * cfg.checkpoint_every
    return max(cfg.min_steps, min(cfg.inner_steps, fit))
