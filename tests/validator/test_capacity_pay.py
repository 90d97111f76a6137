"""Pay follows verified tokens times quality, compared per step on an absolute scale
(capacity-scaled work, docs/PROTOCOL.md §10.7).

The attacks: one machine trains H steps a round. Registered as n identities, each gets 1/n of
the machine and trains H/n steps (down to the run's minimum). If pay followed usefulness alone,
short updates (held-out gain grows less than in proportion to steps) would out-earn the one long
update; and while the over-norm filter compared raw norms with the round's median, identities at
the minimum step count made the median a minimum-step norm, so every honest full-length update
was "over norm" and zeroed. Now a score is min(1, gain / f) x steps / H, absolute, and the
over-norm test compares norms per step with the reference the state carries."""

from __future__ import annotations

import dataclasses

import fixtures_training as ft
import pytest

from protocol.core.aggregation.state import aggregate, genesis_state
from protocol.core.crypto.hashing import blake3_hash
from protocol.core.proof.submission import honest
from protocol.core.train.compute_config import ComputeConfig
from protocol.devnet import cheats as adv
from validator.scoring import (
    DecodedUpdate,
    RoundEntry,
    ZeroReason,
    absolute_score,
    decode_for_scoring,
    exact_norm,
    score_round,
)

FULL = ComputeConfig(batch_size=4, pages_per_miner=4)  # H = 30, k = 3, minimum 3
SEED = blake3_hash("validator-seed", b"capacity")
WHOLE = 100  # the machine as one identity


def _entry(i: int, steps: int, ds, theta) -> RoundEntry:  # type: ignore[no-untyped-def]
    t = dataclasses.replace(ft.task(i), cfg=FULL.with_steps(steps))
    return RoundEntry(t, i, honest(t, ds, theta, None).blob, True)


def _splits() -> dict[int, int]:
    """Every split of one machine: identities of s steps, as many as fit in H, for every s."""
    return {s: FULL.inner_steps // s for s in FULL.allowed_steps() if s < FULL.inner_steps}


@pytest.fixture(scope="module")
def world(profile, ds, theta):  # type: ignore[no-untyped-def]
    """The whole machine at H, two honest miners at H, and every split's identities."""
    entries = {WHOLE: _entry(WHOLE, 30, ds, theta), 0: _entry(0, 30, ds, theta), 1: _entry(1, 30, ds, theta)}
    ident = 200
    split_ids: dict[int, list[int]] = {}
    for s, n in _splits().items():
        split_ids[s] = list(range(ident, ident + n))
        entries.update({i: _entry(i, s, ds, theta) for i in split_ids[s]})
        ident += n
    scores = score_round(list(entries.values()), ds, theta, SEED)
    return entries, split_ids, {i: scores[ft.miner(i)] for i in entries}


def test_no_split_of_one_machine_earns_more_than_the_whole(world):  # type: ignore[no-untyped-def]
    _, split_ids, scores = world
    whole = scores[WHOLE].score
    assert whole > 0
    earned = {s: sum(scores[i].score for i in ids) for s, ids in split_ids.items()}
    assert all(0 < v < whole for v in earned.values()), (whole, earned)
    # the margin is wide: the best split (the longest identities) keeps under 95 % of the whole
    assert max(earned.values()) < 0.95 * whole
    # the attack is real: by usefulness alone ten 3-step updates are worth more than one of 30
    gain = sum(scores[i].usefulness.value for i in split_ids[3])  # type: ignore[union-attr]
    assert gain > scores[WHOLE].usefulness.value  # type: ignore[union-attr]


def test_a_score_is_absolute_whoever_else_was_scored(world, ds, theta):  # type: ignore[no-untyped-def]
    """The same update scores the same beside fast miners, beside slow ones, or alone."""
    entries, split_ids, scores = world
    beside_slow = [entries[WHOLE], *[entries[i] for i in split_ids[3]]]
    alone = [entries[WHOLE]]
    for round_entries in (beside_slow, alone):
        assert score_round(round_entries, ds, theta, SEED)[ft.miner(WHOLE)].score == scores[WHOLE].score
    u = scores[WHOLE].usefulness
    assert scores[WHOLE].score == absolute_score(u.relative, 30, FULL)  # type: ignore[union-attr]


def test_split_scores_stay_below_the_whole_when_the_quality_cap_binds(world, ds, theta):  # type: ignore[no-untyped-def]
    """At a tiny full-score gain every positive update is capped: pay is then the steps alone."""
    entries, split_ids, _ = world
    capped = dataclasses.replace(FULL, score_full_gain=1e-6)
    ents = [dataclasses.replace(e, task=dataclasses.replace(e.task, cfg=capped.with_steps(e.task.cfg.inner_steps)))
            for e in entries.values()]
    scores = {m: s.score for m, s in score_round(ents, ds, theta, SEED).items()}
    assert scores[ft.miner(WHOLE)] == 65535
    for s, ids in split_ids.items():
        assert sum(scores[ft.miner(i)] for i in ids) <= 65535 * s * len(ids) // 30


def _mostly_slow_state(entries, split_ids, theta):  # type: ignore[no-untyped-def]
    """θ_r formed by a round of nine minimum-step updates and one full one: its norm per step."""
    slow = [entries[i] for i in split_ids[3][:9]] + [entries[0]]
    return aggregate(genesis_state(ft.MICRO, FULL, params=theta), [e.blob for e in slow], ft.MICRO, FULL,
                     [e.task.cfg.inner_steps for e in slow])


def test_a_fast_honest_miner_among_slow_ones_is_never_zeroed_and_earns_most(world, ds, theta):  # type: ignore[no-untyped-def]
    entries, split_ids, _ = world
    state = _mostly_slow_state(entries, split_ids, theta)
    round_entries = [entries[WHOLE], *[entries[i] for i in split_ids[3]]]
    scores = score_round(round_entries, ds, theta, SEED, step_norm=state.step_norm)
    fast = scores[ft.miner(WHOLE)]
    assert fast.zero_reason is None
    assert fast.score > max(s.score for m, s in scores.items() if m != ft.miner(WHOLE))
    # what the old rule did: the raw norm over 5 x the round's median norm
    norms = sorted(exact_norm(_decoded(e).dense) for e in round_entries)
    assert exact_norm(_decoded(entries[WHOLE]).dense) > 5 * norms[len(norms) // 2]


def test_an_over_norm_update_is_still_zeroed_at_any_step_count(world, ds, theta):  # type: ignore[no-untyped-def]
    entries, split_ids, _ = world
    state = _mostly_slow_state(entries, split_ids, theta)
    short = entries[split_ids[3][0]]
    poisoned = dataclasses.replace(short, blob=adv.scale_blob(short.task, short.blob, 50.0))
    long = entries[WHOLE]
    poisoned_long = dataclasses.replace(long, blob=adv.scale_blob(long.task, long.blob, 50.0))
    scores = score_round([poisoned, poisoned_long, entries[1]], ds, theta, SEED, step_norm=state.step_norm)
    assert scores[short.task.miner].zero_reason is ZeroReason.OVER_NORM
    assert scores[long.task.miner].zero_reason is ZeroReason.OVER_NORM
    assert scores[ft.miner(1)].zero_reason is None and scores[ft.miner(1)].score > 0


def _decoded(e: RoundEntry) -> DecodedUpdate:
    u = decode_for_scoring(e.task.miner, e.commit_order, e.blob, e.task.model, e.task.cfg)
    assert u is not None
    return u
