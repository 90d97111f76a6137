"""Pay follows verified tokens times quality (capacity-scaled work, docs/PROTOCOL.md §10.7).

The attack: one machine trains H steps a round. Registered as three identities, each gets a
third of the machine and trains a third of the steps. If pay followed usefulness alone, three
short updates (held-out gain grows less than in proportion to steps) would out-earn the one
long update. Weighting by steps makes the three together earn less than the one."""

from __future__ import annotations

import dataclasses

import fixtures_training as ft
import pytest

from protocol.core.crypto.hashing import blake3_hash
from protocol.core.proof.submission import honest
from protocol.core.train.compute_config import ComputeConfig
from validator.scoring import RoundEntry, score_round

FULL = ComputeConfig(batch_size=4, pages_per_miner=4)  # H = 30, k = 3
SEED = blake3_hash("validator-seed", b"capacity")


def _entry(i: int, steps: int, ds, theta) -> RoundEntry:  # type: ignore[no-untyped-def]
    t = dataclasses.replace(ft.task(i), cfg=FULL.with_steps(steps))
    return RoundEntry(t, i, honest(t, ds, theta, None).blob, True)


@pytest.fixture(scope="module")
def worlds(profile, ds, theta):  # type: ignore[no-untyped-def]
    """Two honest miners at H beside (a) the machine as one identity at H, (b) the same machine
    as three identities of 9 steps each (the most a third of it fits: a multiple of k)."""
    others = [_entry(i, 30, ds, theta) for i in (0, 1)]
    single = [*others, _entry(2, 30, ds, theta)]
    split = [*others, *[_entry(i, 9, ds, theta) for i in (3, 4, 5)]]
    return single, split


def _shares(entries, ds, theta) -> dict[bytes, float]:  # type: ignore[no-untyped-def]
    scores = {m: s.score for m, s in score_round(entries, ds, theta, SEED).items()}
    total = sum(scores.values())
    return {m: v / total for m, v in scores.items()}


def test_splitting_one_machine_into_three_identities_earns_less_than_staying_one(worlds, ds, theta):  # type: ignore[no-untyped-def]
    single, split = worlds
    one = _shares(single, ds, theta)[ft.miner(2)]
    three = sum(_shares(split, ds, theta)[ft.miner(i)] for i in (3, 4, 5))
    assert 0 < three < one
    # the attack is real: by usefulness alone the three short updates would be worth more
    gain = {m: s.usefulness.value for m, s in score_round(single + split[2:], ds, theta, SEED).items()}  # type: ignore[union-attr]
    assert sum(gain[ft.miner(i)] for i in (3, 4, 5)) > gain[ft.miner(2)]


def test_a_slow_honest_miner_is_paid_less_but_takes_part(worlds, ds, theta):  # type: ignore[no-untyped-def]
    _, split = worlds
    scores = {m: s for m, s in score_round(split, ds, theta, SEED).items()}
    fast = [scores[ft.miner(i)].score for i in (0, 1)]
    slow = [scores[ft.miner(i)] for i in (3, 4, 5)]
    assert all(s.zero_reason is None and 0 < s.score < min(fast) for s in slow)


def test_equal_steps_score_as_before_capacity_scaling(worlds, ds, theta):  # type: ignore[no-untyped-def]
    """With every miner at H the weights cancel: the scores are the usefulness ranking alone."""
    single, _ = worlds
    scores = score_round(single, ds, theta, SEED)
    by_value = sorted(scores, key=lambda m: scores[m].usefulness.value)  # type: ignore[union-attr]
    assert sorted(scores, key=lambda m: scores[m].score) == by_value
    assert max(s.score for s in scores.values()) == 65535
