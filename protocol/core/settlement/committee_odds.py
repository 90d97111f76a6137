"""The odds of check committees (`committees.py`), exact: a coalition's chance of a committee
majority, and a committee's chance of catching a one-segment fake.

Seats are drawn by stake unit with replacement, so a coalition holding share α of the stake takes
a committee majority with exactly the binomial tail `p_majority(α, c)`, however the coalition
and everyone else split their stake (tests/core/test_committees.py checks it against the real
draw). These numbers size the defaults and fill the trust table; nothing settles on them.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from fractions import Fraction
from math import comb

from protocol.core.settlement.committees import DRAWN_PER_SEAT


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
    unit with replacement (exact: by the count of validators seen so far when the stakes are
    equal, else by enumerating the v^size draws, for a few validators)."""
    live = [w for w in weights if w]
    if len(set(live)) == 1:
        return _p_distinct_equal(len(live), size)
    total = sum(live)
    shares = [Fraction(w, total) for w in live]
    out: dict[int, Fraction] = {}
    for draw in itertools.product(range(len(shares)), repeat=size):
        chance = Fraction(1)
        for i in draw:
            chance *= shares[i]
        distinct = len(set(draw))
        out[distinct] = out.get(distinct, Fraction(0)) + chance
    return out


def _p_distinct_equal(validators: int, size: int) -> dict[int, Fraction]:
    """`p_distinct` for `validators` of equal stake: each seat is a new validator with chance
    (v - seen) / v."""
    odds = {0: Fraction(1)}
    for _ in range(size):
        nxt: dict[int, Fraction] = {}
        for seen, chance in odds.items():
            new = Fraction(validators - seen, validators)
            nxt[seen + 1] = nxt.get(seen + 1, Fraction(0)) + chance * new
            nxt[seen] = nxt.get(seen, Fraction(0)) + chance * (1 - new)
        odds = {d: c for d, c in nxt.items() if c}
    return odds


def p_committee_catches(weights: Sequence[int], size: int, segments: int, per_check: int) -> Fraction:
    """The chance a miner's checkers catch a one-segment fake: the distinct holders of its
    `DRAWN_PER_SEAT * size` drawn seats (committee and backups all check and report), each
    challenging `per_check` of `segments`."""
    return sum((chance * p_catches_one_segment(segments, per_check, d)
                for d, chance in p_distinct(weights, DRAWN_PER_SEAT * size).items()), Fraction(0))


def per_check_matching(weights: Sequence[int], size: int, segments: int, today_per_check: int) -> int:
    """The fewest segments each committee member must challenge for a committee to catch a
    one-segment fake at least as often as every validator does without committees, challenging
    `today_per_check` each."""
    today = p_catches_one_segment(segments, today_per_check, sum(1 for w in weights if w))
    for per_check in range(today_per_check, segments + 1):
        if p_committee_catches(weights, size, segments, per_check) >= today:
            return per_check
    return segments


REFERENCE_VALIDATORS = 3  # the devnet's: a committee must catch a fake at least as often as they all do at q = 1


def committee_per_check(size: int, segments: int) -> int:
    """The fewest segments each checker must challenge for every committee of `size` in force to
    catch a one-segment fake at least as often as `REFERENCE_VALIDATORS` validators that all check
    it at q = 1. A committee is in force only over more than `size` deciders
    (`committees.in_force`), and with equal stakes the odds grow with their number, so the
    fewest, size + 1, decide: 1 for c >= 3, 2 below."""
    today = p_catches_one_segment(segments, 1, REFERENCE_VALIDATORS)
    for per_check in range(1, segments + 1):
        if p_committee_catches([1] * (size + 1), size, segments, per_check) >= today:
            return per_check
    return segments
