"""Check committees drawn by stake unit (protocol/core/settlement/committees.py, committee_odds.py): deterministic
from chain data, a coalition's chance of a committee majority is the binomial tail however the
stake is split (checked against the real draw), a silent validator's seat passes to a backup,
and the segments each member must challenge so a committee catches a one-segment fake as often
as every validator does today."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import pytest

from protocol.core.errors import ConfigError
from protocol.core.settlement.committee_odds import (
    p_catches_one_segment,
    p_committee_catches,
    p_distinct,
    p_majority,
    per_check_matching,
)
from protocol.core.settlement.committees import assignments, committee, drawn_seats, seat_counts

SEED = bytes(range(32))


def miner(i: int) -> bytes:
    return i.to_bytes(20, "big")


def test_the_draw_is_a_function_of_chain_data() -> None:
    weights = [300, 200, 500, 250]
    assert committee(SEED, miner(7), weights, 3) == committee(SEED, miner(7), list(weights), 3)
    draws = {committee(bytes([s]) * 32, miner(7), weights, 3) for s in range(40)}
    assert len(draws) > 10  # the seed moves it
    assert all(0 <= v < len(weights) for seats in draws for v in seats)


@pytest.mark.parametrize("share", [Fraction(1, 10), Fraction(1, 5), Fraction(1, 3)])
@pytest.mark.parametrize("size", [3, 5])
def test_a_coalitions_majority_odds_are_the_binomial_tail_however_the_stake_is_split(share, size) -> None:
    # the coalition splits its stake unevenly over 3 accounts, the others over 17 of varying size
    total = 3 * 5 * 7 * 1000
    bloc = int(total * share)
    coalition = [bloc // 2, bloc // 3, bloc - bloc // 2 - bloc // 3]
    rest = total - bloc
    others = [rest // 17 + (i - 8) * 3 for i in range(16)]
    others.append(rest - sum(others))
    weights = coalition + others
    trials = 4000
    captured = sum(sum(v < 3 for v in committee(SEED, miner(i), weights, size)) > size // 2 for i in range(trials))
    p = float(p_majority(Fraction(bloc, total), size))
    sigma = math.sqrt(p * (1 - p) / trials)
    assert abs(captured / trials - p) < 4 * sigma + 1e-9, (captured / trials, p)


def test_exact_odds_at_the_trust_table_rows() -> None:
    assert p_majority(Fraction(1, 3), 3) == Fraction(7, 27)
    assert p_majority(Fraction(1, 10), 3) == Fraction(28, 1000)
    for share in (Fraction(1, 10), Fraction(1, 5), Fraction(1, 3)):
        odds = [p_majority(share, c) for c in (3, 5, 7)]
        assert odds == sorted(odds, reverse=True)  # a larger committee is harder to capture below 1/2


def test_a_silent_validators_seat_passes_to_a_backup() -> None:
    weights = [100] * 6
    revealed = [i not in (1, 4) for i in range(6)]  # two of six never revealed
    full = 0
    for i in range(200):
        seats = committee(SEED, miner(i), weights, 3, revealed)
        drawn = drawn_seats(SEED, miner(i), weights, 3)
        assert len(drawn) == 6 and all(revealed[v] for v in seats)
        assert list(seats) == [v for v in drawn if revealed[v]][:3]  # the first revealed seats, in order
        counts = seat_counts(SEED, miner(i), weights, 3, revealed)
        assert sum(counts) == len(seats) and all(counts[v] == seats.count(v) for v in range(6))
        full += len(seats) == 3
    # short only when 4 of the 6 drawn seats are silent: P(Bin(6, 2/3) <= 2) = 73/729, about 10 %
    assert 0.9 - 0.07 < full / 200 < 0.9 + 0.07


def test_a_committee_comes_up_short_only_when_most_seats_are_silent() -> None:
    weights = [100] * 10
    revealed = [i == 0 for i in range(10)]  # one of ten revealed
    sizes = {len(committee(SEED, miner(i), weights, 3, revealed)) for i in range(100)}
    assert max(sizes) <= 3 and min(sizes) == 0  # 6 seats drawn: most miners find nobody


def test_every_holder_of_a_drawn_seat_checks_the_miner() -> None:
    weights = [100, 300, 200, 50, 350]
    miners = [miner(i) for i in range(300)]
    work = assignments(SEED, miners, weights, 3)
    for i, m in enumerate(miners):
        assert {v for v, assigned in enumerate(work) if i in assigned} == set(drawn_seats(SEED, m, weights, 3))
    # a validator with share w of the stake checks a miner with chance 1 - (1 - w)^6 (6 seats drawn)
    for assigned, w in zip(work, weights, strict=True):
        expected = 300 * (1 - (1 - w / 1000) ** 6)
        assert abs(len(assigned) - expected) < 4 * math.sqrt(expected) + 1, (len(assigned), expected)


def test_a_committee_needs_weight_and_a_seat() -> None:
    with pytest.raises(ConfigError, match="needs validators with weight"):
        committee(SEED, miner(1), [0, 0], 3)
    with pytest.raises(ConfigError, match="at least one seat"):
        committee(SEED, miner(1), [1, 1], 0)


def test_committees_catch_a_one_segment_fake_as_often_as_today_once_q_is_raised() -> None:
    # the devnet: 3 validators of equal stake, 10 segments, q = 1 each today
    weights, segments = [1, 1, 1], 10
    today = p_catches_one_segment(segments, 1, 3)
    assert today == 1 - Fraction(9, 10) ** 3
    assert p_committee_catches(weights, 3, segments, 1) < today  # seats repeat: fewer distinct checkers
    q = per_check_matching(weights, 3, segments, 1)
    assert q == 2 and p_committee_catches(weights, 3, segments, q) >= today


def test_the_distinct_checkers_of_equal_stakes_match_the_enumeration() -> None:
    for v, size in ((3, 3), (4, 5), (6, 3)):
        brute: dict[int, Fraction] = {}
        for draw in itertools.product(range(v), repeat=size):
            brute[len(set(draw))] = brute.get(len(set(draw)), Fraction(0)) + Fraction(1, v**size)
        assert p_distinct([7] * v, size) == brute
        nearly = p_distinct([70] * (v - 1) + [71], size)  # unequal stakes: enumerated
        assert all(abs(float(brute[d] - nearly.get(d, 0))) < 0.01 for d in brute)
