"""The on-chain stake-weighted median against a Python reference, and finalize against `settle_ref`."""

import boa
import pytest
from conftest import (
    TOKEN,
    Params,
    deploy_stack,
    make_world,
    settle_ref,
    weighted_median_ref,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

scores_st = st.one_of(st.integers(0, 65535), st.sampled_from([0, 1, 1000, 32767, 32768, 65534, 65535]))
weights_st = st.one_of(st.integers(0, 2**96), st.sampled_from([0, 1, 200 * TOKEN, 300 * TOKEN]))


@st.composite
def columns(draw, min_size=1, max_size=16):
    n = draw(st.integers(min_size, max_size))
    scores = draw(st.lists(scores_st, min_size=n, max_size=n))
    weights = draw(st.lists(weights_st, min_size=n, max_size=n))
    return scores, weights


def brute_force_median(scores, weights) -> int:
    """Independent formulation: scan every uint16 threshold that is a score, from the top; the
    first with a strict majority of the weight behind it."""
    total = sum(weights)
    if total == 0:
        return 0
    for w in sorted(set(scores), reverse=True):
        if 2 * sum(wt for s, wt in zip(scores, weights, strict=True) if s >= w) > total:
            return w
    return 0


@pytest.fixture
def settlement_contract():
    return deploy_stack().settlement


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(col=columns())
def test_weighted_median_matches_reference(settlement_contract, col):
    scores, weights = col
    expected = weighted_median_ref(scores, weights)
    assert expected == brute_force_median(scores, weights)
    assert settlement_contract.weighted_median(scores, weights) == expected


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(col=columns(min_size=48, max_size=64))
def test_weighted_median_matches_reference_on_large_validator_sets(settlement_contract, col):
    scores, weights = col
    assert settlement_contract.weighted_median(scores, weights) == weighted_median_ref(scores, weights)


def test_weighted_median_edges(settlement_contract):
    wm = settlement_contract.weighted_median
    assert wm([], []) == 0
    assert wm([7], [0]) == 0  # zero total weight: no score has support
    assert wm([3, 9, 5], [0, 0, 0]) == 0 == weighted_median_ref([3, 9, 5], [0, 0, 0])
    assert wm([65535, 1], [0, 0]) == 0
    assert wm([9, 5], [0, 1]) == 5  # a zero-weight score adds no support
    assert wm([100, 0], [1, 1]) == 0  # exactly half cannot raise a score (strict majority)
    assert wm([100, 0], [2, 1]) == 100
    assert wm([100, 0], [1, 2]) == 0
    assert wm([100, 50, 0], [1, 1, 1]) == 50
    assert wm([65535] * 64, [2**96] * 64) == 65535
    assert wm([10, 20, 30, 40], [1, 1, 1, 1]) == 20  # 30 and 40 hold only half the weight
    assert wm([10, 20, 30, 40], [1, 1, 1, 2]) == 30  # 30 and 40 hold 3/5


@settings(max_examples=25, deadline=None)
@given(stakes=st.lists(st.integers(200, 2000), min_size=1, max_size=4), data=st.data())
def test_finalize_matches_reference_on_random_rounds(stakes, data):
    """Random stakes, scores and a random subset of revealers: finalize credits exactly `settle_ref`."""
    with boa.env.anchor():
        w = make_world(Params(), n_miners=3, validator_stakes=tuple(s * TOKEN for s in stakes))
        ordered = w.to_scoring(0)
        scores = {v: data.draw(st.lists(scores_st, min_size=3, max_size=3)) for v in w.validators}
        revealers = data.draw(st.lists(st.sampled_from(w.validators), unique=True, max_size=len(stakes)))
        for v in w.validators:
            w.commit_scores(0, v, scores[v], ordered)
        for v in revealers:
            w.reveal(0, v)
        boa.env.time_travel(seconds=w.stack.params.reveal_duration)
        w.finish_audits(0)
        w.s.finalize(0)
        weights = {v: w.s.validator_weight(0, v) for v in revealers}
        cons, mrew, vrew, _ = settle_ref(Params(), weights, {v: scores[v] for v in revealers}, ordered,
                                         total_weight=w.s.total_weight(0))
        assert w.s.fallback(0) == (sum(weights.values()) * 3 <= w.s.total_weight(0) * 2)
        assert [w.s.consensus(0, m) for m in ordered] == [cons[m] for m in ordered]
        assert [w.s.claimable(m) for m in ordered] == [mrew[m] for m in ordered]
        assert [w.s.claimable(v) for v in w.validators] == [vrew.get(v, 0) for v in w.validators]
        assert w.s.total_minted() == sum(mrew.values()) + sum(vrew.values()) == w.s.total_claimable()
        assert w.t.totalSupply() == w.stack.genesis + w.s.total_minted()
