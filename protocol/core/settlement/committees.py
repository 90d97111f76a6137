"""Check committees: which validators check a miner in a round and whose scores decide its column
(docs/PROTOCOL.md §10.8; the odds are in `committee_odds.py`).

A miner's committee is `c` seats (`chain.committee` in the run config; 0: no committees, every
holder of the miner's class decides, as before). Seat j of miner m is drawn **by stake unit,
with replacement**: the validator whose slice of the cumulative weight holds
`keccak256(DOMAIN ‖ seed ‖ m ‖ j) mod W`, among the validators eligible for m (the holders of
its class, or everyone when the class is not covered: `class_checks.py`). With replacement, each
seat goes to a holder with exactly its share of the stake however that stake is split across
accounts, so splitting gains nothing. A validator drawn for two seats checks once and its score
counts twice.

Committees are in force for a column only when its deciders with stake outnumber its seats
(`in_force`): a committee of c drawn from c or fewer validators is all of them, fewer checks it
does not save, and a draw with replacement could leave one out, so below that every decider
decides by stake as without committees. The default c = 3 thus changes nothing for a network
of three validators.

Seats 0 .. 2c - 1 are drawn, and every validator holding one checks m: seats c .. 2c - 1 are
backups. The committee is the first c drawn seats whose validator revealed, so a silent seat
passes to the next backup and a few offline validators leave no miner without a quorum.

The seed is the round's seed (`Rounds.round_info(r).seed`, the hash of the block that closed the
commit phase mixed with the RANDAO of the later block that stored it): it exists only after every
commit of the round is on chain and the validator snapshot was fixed at round open, so neither a
miner (its address and commit are fixed before) nor a validator (its stake and address are fixed
at the snapshot) can choose where its seats fall, and the closing block's proposer, who can grind
its block's hash, does not know the later RANDAO. The chain draws the same seats (`contracts/committee_draw.vy`).
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Sequence

from protocol.core.crypto.keccak import keccak256
from protocol.core.errors import ConfigError

DOMAIN = b"veritrain/committee/v1"
DRAWN_PER_SEAT = 2  # seats drawn per committee seat: c seats, then c backups


def in_force(size: int, eligible: Sequence[int]) -> bool:
    """Whether a committee of `size` seats decides a column whose deciders have the stakes
    `eligible` (0: not a decider): only when more of them hold stake than there are seats."""
    return size > 0 and sum(1 for w in eligible if w) > size


def seat_point(seed: bytes, miner: bytes, seat: int, total: int) -> int:
    """Where seat `seat` of `miner` falls on the line of stake units [0, total)."""
    digest = keccak256(DOMAIN + seed + miner + seat.to_bytes(32, "big"))
    return int.from_bytes(digest, "big") % total


def seat_holder(seed: bytes, miner: bytes, seat: int, cumulative: Sequence[int]) -> int:
    """The index of the validator holding seat `seat` of `miner`: the one whose slice of the
    cumulative weight (`itertools.accumulate` of the weights) holds the seat's point (a zero
    weight holds no slice)."""
    return bisect.bisect_right(cumulative, seat_point(seed, miner, seat, cumulative[-1]))


def drawn_seats(seed: bytes, miner: bytes, weights: Sequence[int], size: int) -> tuple[int, ...]:
    """The validator index of each of `miner`'s `DRAWN_PER_SEAT * size` drawn seats, in seat
    order (committee seats first, then backups). A validator may hold several."""
    if size <= 0:
        raise ConfigError(f"a committee has at least one seat, not {size}")
    cumulative = list(itertools.accumulate(weights))
    if not cumulative or cumulative[-1] <= 0:
        raise ConfigError("a committee needs validators with weight")
    return tuple(seat_holder(seed, miner, seat, cumulative) for seat in range(DRAWN_PER_SEAT * size))


def committee(seed: bytes, miner: bytes, weights: Sequence[int], size: int,
              revealed: Sequence[bool] | None = None) -> tuple[int, ...]:
    """The validator index of each of `miner`'s committee seats: the first `size` drawn seats
    whose validator revealed (every seat counts when `revealed` is None). Short when more than
    `size` of the drawn seats fall to silent validators."""
    seats = [v for v in drawn_seats(seed, miner, weights, size) if revealed is None or revealed[v]]
    return tuple(seats[:size])


def seat_counts(seed: bytes, miner: bytes, weights: Sequence[int], size: int,
                revealed: Sequence[bool]) -> tuple[int, ...]:
    """Per validator, how many of `miner`'s committee seats it holds: its weight in the column."""
    counts = [0] * len(weights)
    for v in committee(seed, miner, weights, size, revealed):
        counts[v] += 1
    return tuple(counts)


def assignments(seed: bytes, miners: Sequence[bytes], weights: Sequence[int], size: int) -> list[set[int]]:
    """Per validator, the miners (by index) it checks: those where it holds a drawn seat, or, with
    no committee in force (`in_force`), every miner when it holds stake."""
    if not in_force(size, weights):
        return [set(range(len(miners))) if w else set() for w in weights]
    out: list[set[int]] = [set() for _ in weights]
    for i, miner in enumerate(miners):
        for v in drawn_seats(seed, miner, weights, size):
            out[v].add(i)
    return out
