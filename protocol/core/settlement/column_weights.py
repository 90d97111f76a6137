"""Whose scores decide a column, and how much each counts (docs/PROTOCOL.md §11.2, §10.8).

Without committees (`committee_size` 0, or no more deciders with stake than seats) a column is decided by its deciders (`class_checks.py`:
the holders of the miner's class, or everyone in tolerance mode), each by its stake, out of their
whole stake revealed or not. With committees, by the miner's committee drawn from those deciders
(`committees.py`): each validator by its seats, out of the committee's `c` seats, so a committee
that comes up short (silent validators) needs 2/3 of `c` filled for its quorum. The chain
computes the same weights (`contracts/committee_draw.vy`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from protocol.core.settlement.committees import in_force, seat_counts


@dataclass(frozen=True)
class ColumnWeights:
    weights: tuple[int, ...]  # per validator: its weight in the column; 0 when it does not decide it
    total: int  # what a consensus needs more than half of, and a quorum 2/3 of

    def decides(self, validator: int) -> bool:
        return self.weights[validator] > 0


def column_weights(stakes: Sequence[int], deciders: Sequence[bool], committee_size: int, seed: bytes,
                   miner: bytes, revealed: Sequence[bool], forfeited: Sequence[bool]) -> ColumnWeights:
    """The column's weights: the deciders' stakes, or their committee seats when a committee of
    `committee_size` is in force (more deciders with stake than seats). A forfeited validator (a report against it confirmed) decides nothing: it leaves the
    deciders, or, with committees, its seats pass to backups as a silent one's do (it stays in
    the draw, so every other seat falls where the checkers saw it fall)."""
    eligible = tuple(s if d else 0 for s, d in zip(stakes, deciders, strict=True))
    if not in_force(committee_size, eligible):
        kept = tuple(s if not f else 0 for s, f in zip(eligible, forfeited, strict=True))
        return ColumnWeights(kept, sum(kept))
    counted = tuple(r and not f for r, f in zip(revealed, forfeited, strict=True))
    return ColumnWeights(seat_counts(seed, miner, eligible, committee_size, counted), committee_size)
