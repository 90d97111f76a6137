"""Whether a validator checks a miner under check committees (docs/PROTOCOL.md §10.8): it holds
one of the miner's 2c drawn seats (committee seats and backups), drawn from the validators that
decide the miner's column (`class_checks.column_deciders`). The chain draws the same seats when
a column is challenged; this is the node's side of that draw."""

from __future__ import annotations

from collections.abc import Sequence

from protocol.core.settlement.committees import drawn_seats, in_force


def holds_a_seat(own: int, miner: bytes, weights: Sequence[int], deciders: Sequence[bool], committee_size: int,
                 seed: bytes) -> bool:
    """Whether validator `own` (its index among the round's validators) holds one of `miner`'s
    drawn seats; everyone who decides does when no committee is in force (`committees.in_force`)."""
    if not deciders[own]:
        return False
    eligible = [w if d else 0 for w, d in zip(weights, deciders, strict=True)]
    if not in_force(committee_size, eligible):
        return True
    return own in drawn_seats(seed, miner, eligible, committee_size)
