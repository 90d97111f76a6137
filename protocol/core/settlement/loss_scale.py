"""Held-out losses on chain are fixed point: a validator reveals round(loss · LOSS_SCALE), and the
lower median of the revealed figures is the result header's `heldout_loss` (PROTOCOL.md §13).
Torch-free, so the chain views and the devnet report read losses without loading a model."""

from __future__ import annotations

LOSS_SCALE = 1_000_000  # 1e6 = a loss of 1.0


def fixed_loss(loss: float) -> int:
    """The loss as a validator reveals it: fixed point, rounded to the nearest unit."""
    return int(round(loss * LOSS_SCALE))

