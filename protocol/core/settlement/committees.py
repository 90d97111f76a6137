"""Check committees: which validators check a miner in a round (docs/DESIGN §8.3; issue 30,
first step: the draw and its odds, pure and recomputable; the nodes and the chain do not use it
yet).

A miner's committee is `c` seats. Seat j of miner m is drawn **by stake unit, with
replacement**: the validator whose slice of the round's cumulative weight holds
`keccak256(seed ‖ m ‖ j) mod W`. With replacement, each seat goes to a holder with exactly its
share of the stake however that stake is split across accounts, so splitting gains nothing
(without replacement, k accounts of one holder would be drawn more often than one account
holding k times the stake). A validator drawn for two seats checks once and its score counts
twice. Seats c, c + 1, ... are backups, in order: the committee is the first c seats whose
validator revealed, so a few offline validators leave no miner without a quorum; the search
stops after `MAX_SEATS` seats, a bound the chain can afford to recompute.

The odds a coalition holding share α of the stake takes a committee majority are then exactly
the binomial tail `p_majority(α, c)`, independent of how the coalition and everyone else split
their stake (tests/core/test_committees.py checks it against the real draw).
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Sequence
from fractions import Fraction
from math import comb

from protocol.core.crypto.keccak import keccak256
from protocol.core.errors import ConfigError

DOMAIN = b"veritrain/committee/v1"
MAX_SEATS_PER_SEAT = 8  # seats searched per committee seat before the committee comes up short


def seat_point(seed: bytes, miner: bytes, seat: int, total: int) -> int:
    """Where seat `seat` of `miner` falls on the line of stake units [0, total)."""
    digest = keccak256(DOMAIN + seed + miner + seat.to_bytes(32, "big"))
    return int.from_bytes(digest, "big") % total


def seat_holder(seed: bytes, miner: bytes, seat: int, cumulative: Sequence[int]) -> int:
    """The index of the validator holding seat `seat` of `miner`: the one whose slice of the
    cumulative weight (`itertools.accumulate` of the weights) holds the seat's point (a zero
    weight holds no slice)."""
    return bisect.bisect_right(cumulative, seat_point(seed, miner, seat, cumulative[-1]))


def committee(seed: bytes, miner: bytes, weights: Sequence[int], size: int,
              revealed: Sequence[bool] | None = None) -> tuple[int, ...]:
    """The validator index of each of `miner`'s `size` seats: the first `size` drawn seats whose
    validator revealed (all count when `revealed` is None), searching at most
    `size * MAX_SEATS_PER_SEAT` seats, so the committee may come up short when most validators
    are silent. A validator may hold several seats."""
    if size <= 0:
        raise ConfigError(f"a committee has at least one seat, not {size}")
    cumulative = list(itertools.accumulate(weights))
    if not cumulative or cumulative[-1] <= 0:
        raise ConfigError("a committee needs validators with weight")
    seats: list[int] = []
    for seat in range(size * MAX_SEATS_PER_SEAT):
        holder = seat_holder(seed, miner, seat, cumulative)
        if revealed is None or revealed[holder]:
            seats.append(holder)
            if len(seats) == size:
                break
    return tuple(seats)


def assignments(seed: bytes, miners: Sequence[bytes], weights: Sequence[int], size: int,
                revealed: Sequence[bool] | None = None) -> list[set[int]]:
    """Per validator, the miners (by index) it checks: those whose committee it holds a seat in."""
    out: list[set[int]] = [set() for _ in weights]
    for i, miner in enumerate(miners):
        for v in committee(seed, miner, weights, size, revealed):
            out[v].add(i)
    return out


def p_majority(share: Fraction | float, size: int) -> Fraction | float:
    """The chance that holders of `share` of the stake take more than half of `size` seats drawn
    by stake unit with replacement: the binomial tail, exact for a Fraction."""
    need = size // 2 + 1
    return sum(comb(size, k) * share**k * (1 - share) ** (size - k) for k in range(need, size + 1))


def p_catches_one_segment(segments: int, per_check: int, checkers: int) -> Fraction:
    """The chance that at least one of `checkers` distinct validators, each challenging
    `per_check` of `segments` segments at random, picks the one faked segment."""
    miss = Fraction(segments - per_check, segments)
    return 1 - miss**checkers


def p_distinct(weights: Sequence[int], size: int) -> dict[int, Fraction]:
    """The distribution of the number of distinct validators among `size` seats drawn by stake
    unit with replacement (exact; for the detection odds, which count distinct checkers)."""
    total = sum(weights)
    shares = [Fraction(w, total) for w in weights if w]
    out: dict[int, Fraction] = {}
    for draw in itertools.product(range(len(shares)), repeat=size):
        chance = Fraction(1)
        for i in draw:
            chance *= shares[i]
        distinct = len(set(draw))
        out[distinct] = out.get(distinct, Fraction(0)) + chance
    return out


def p_committee_catches(weights: Sequence[int], size: int, segments: int, per_check: int) -> Fraction:
    """The chance a committee of `size` seats catches a one-segment fake: over the number of
    distinct validators the seats fall to, each challenging `per_check` of `segments`."""
    return sum((chance * p_catches_one_segment(segments, per_check, d)
                for d, chance in p_distinct(weights, size).items()), Fraction(0))


def per_check_matching(weights: Sequence[int], size: int, segments: int, today_per_check: int) -> int:
    """The fewest segments each committee member must challenge for a committee to catch a
    one-segment fake at least as often as every validator does today, challenging
    `today_per_check` each."""
    today = p_catches_one_segment(segments, today_per_check, sum(1 for w in weights if w))
    for per_check in range(today_per_check, segments + 1):
        if p_committee_catches(weights, size, segments, per_check) >= today:
            return per_check
    return segments
