"""compute_result (docs/PROTOCOL.md §11.2) against a brute-force reference, and its invariants."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from result_strategies import ACCOUNTS, round_inputs, scores_st, weights_st

from protocol.core.errors import ResultError
from protocol.core.settlement.result import ONE, RoundResult, compute_result, weighted_median
from protocol.core.settlement.result_inputs import PrevEntry, Reveal, RoundInputs

# ---- the reference: the spec's sentences, one loop each, no shared helpers -------------------


def ref_median(column: list[int], weights: list[int], total: int | None = None) -> int:
    """Try every candidate value; keep the largest with strictly more than half of `total` (the
    deciders' weight, revealed or not; default the weights') at or above."""
    total = sum(weights) if total is None else total
    best = 0
    for x in set(column):
        support = sum(w for s, w in zip(column, weights, strict=True) if s >= x)
        if support * 2 > total and x > best:
            best = x
    return best


def reference(inp: RoundInputs) -> dict:
    n, vs = len(inp.miners), list(inp.validators)
    w = dict(zip(vs, inp.weights, strict=True))
    revealed = [v for v in vs if v in inp.reveals]
    big_r = sum(w[v] for v in revealed)
    quorum = big_r > 0 and 3 * big_r >= 2 * sum(inp.weights)
    c, deciders, column_quorum = [], [], []
    for i, m in enumerate(inp.miners):
        # a column is decided by the validators holding its miner's class (unset = class 0),
        # unless they weigh less than the minimum or 2/3 of the round: then by everyone (tolerance mode)
        miner_mask = (inp.miner_classes[i] if inp.miner_classes else 0) or 1
        holders = [v for j, v in enumerate(vs) if ((inp.validator_classes[j] if inp.validator_classes else 0) or 1) & miner_mask]
        held = sum(w[v] for v in holders)
        d = holders if held > 0 and held >= inp.min_class_weight and 3 * held >= 2 * sum(inp.weights) else vs
        d = [v for v in d if v not in inp.forfeited]  # a report against it confirmed: it decides nothing
        deciders.append(set(d))
        voters = [v for v in revealed if v in d]
        voted = sum(w[v] for v in voters)
        column_quorum.append(quorum and voted > 0 and 3 * voted >= 2 * sum(w[v] for v in d))
        if not column_quorum[i] or m in inp.forfeited:
            c.append(0)
        else:
            c.append(ref_median([inp.reveals[v].scores[i] for v in voters], [w[v] for v in voters],
                                sum(w[v] for v in d)))
    p_m = inp.emission * inp.miner_share_bps // 10_000
    p_v = inp.emission - p_m
    pay = [p_m * ci // sum(c) if sum(c) > 0 else 0 for ci in c]
    credit = {v: [0] * n for v in vs}
    for i in range(n):
        a = {}
        for v in vs:
            if v not in inp.reveals or v in inp.forfeited or v not in deciders[i]:
                a[v] = 0
            elif not column_quorum[i]:
                a[v] = ONE
            else:
                s = inp.reveals[v].scores[i]
                a[v] = ONE if max(s, c[i]) == 0 else ONE * min(s, c[i]) // max(s, c[i])
        d = sum(w[v] * a[v] for v in vs)
        for v in vs:
            credit[v][i] = (p_v // n) * (w[v] * a[v]) // d if d else 0
    old = {acct: (e.reputation, e.cumulative) for acct, e in inp.prev.items()}
    losses = sorted(inp.reveals[v].heldout_loss for v in revealed)
    return dict(
        quorum=quorum, consensus=c, pay=pay,
        reputation=[(9 * old.get(m, (0, 0))[0] + c[i]) // 10 for i, m in enumerate(inp.miners)],
        cumulative=[old.get(m, (0, 0))[1] + pay[i] for i, m in enumerate(inp.miners)],
        credits=[[credit[v][i] for v in vs] for i in range(n)],
        validator_credit=[sum(credit[v]) for v in vs],
        validator_cumulative=[old.get(v, (0, 0))[1] + sum(credit[v]) for v in vs],
        minted=sum(pay) + sum(sum(credit[v]) for v in vs),
        heldout_loss=losses[(len(losses) - 1) // 2] if losses else 0,
    )


def as_lists(result: RoundResult) -> dict:
    out = {f.name: getattr(result, f.name) for f in dataclasses.fields(result)}
    out.pop("n")
    return {k: [list(x) for x in v] if k == "credits" else (list(v) if isinstance(v, tuple) else v)
            for k, v in out.items()}


@settings(max_examples=500, deadline=None)
@given(round_inputs())
def test_compute_result_matches_the_reference(inp: RoundInputs) -> None:
    assert as_lists(compute_result(inp)) == reference(inp)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(scores_st, weights_st), max_size=8))
def test_weighted_median_matches_trying_every_candidate(pairs: list[tuple[int, int]]) -> None:
    column, weights = [s for s, _ in pairs], [w for _, w in pairs]
    assert weighted_median(column, weights) == ref_median(column, weights)


# ---- invariants ------------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(round_inputs())
def test_totals_never_exceed_the_pools(inp: RoundInputs) -> None:
    res = compute_result(inp)
    assert res.minted <= inp.emission
    assert sum(res.pay) <= inp.miner_pool
    for column in res.credits:
        assert sum(column) <= inp.validator_pool // inp.n
    for j in range(len(inp.validators)):
        assert res.validator_credit[j] == sum(column[j] for column in res.credits)
    assert res.minted == sum(res.pay) + sum(res.validator_credit)


@settings(max_examples=300, deadline=None)
@given(round_inputs())
def test_forfeited_and_unrevealed_accounts_earn_nothing(inp: RoundInputs) -> None:
    res = compute_result(inp)
    for i, miner in enumerate(inp.miners):
        if miner in inp.forfeited:
            assert res.consensus[i] == 0 and res.pay[i] == 0
    for j, validator in enumerate(inp.validators):
        if validator in inp.forfeited or validator not in inp.reveals:
            assert res.validator_credit[j] == 0


@settings(max_examples=300, deadline=None)
@given(round_inputs())
def test_without_quorum_no_miner_is_paid_and_validators_share_by_stake(inp: RoundInputs) -> None:
    res = compute_result(inp)
    if res.quorum:
        return
    assert set(res.consensus) <= {0} and set(res.pay) <= {0}
    for i, column in enumerate(res.credits):
        deciders = inp.deciders(i)  # the class holders, or everyone (tolerance mode)
        paid = [j for j, v in enumerate(inp.validators) if v in inp.reveals and v not in inp.forfeited and deciders[j]]
        stake = sum(inp.weights[j] for j in paid)
        for j in range(len(inp.validators)):
            expected = (inp.validator_pool // inp.n) * inp.weights[j] // stake if j in paid and stake else 0
            assert column[j] == expected


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(scores_st, st.integers(1, 10**20)), min_size=1, max_size=6),
       st.lists(scores_st, min_size=1, max_size=6))
def test_exactly_half_the_weight_cannot_raise_a_score(honest: list[tuple[int, int]], raised: list[int]) -> None:
    """A coalition holding exactly the honest half's weight, scoring anything, never lifts the
    consensus above the best honest score."""
    weights = [w for _, w in honest]
    total = sum(weights)
    coalition = [total // len(raised)] * len(raised)
    coalition[-1] += total - sum(coalition)  # the coalition's weight is exactly the honest weight
    column = [s for s, _ in honest] + raised
    assert weighted_median(column, weights + coalition) <= max(s for s, _ in honest)


def test_weighted_median_ties_and_edges() -> None:
    assert weighted_median([], []) == 0
    assert weighted_median([100, 200], [1, 1]) == 100  # half the weight for 200 is not a majority
    assert weighted_median([100, 200], [1, 2]) == 200
    assert weighted_median([7, 7, 3], [1, 1, 2]) == 3  # 7 has exactly half
    assert weighted_median([7, 7, 3], [1, 2, 2]) == 7
    assert weighted_median([5, 9], [0, 0]) == 0  # no weight, no majority
    assert weighted_median([65535, 65535, 0], [1, 1, 1]) == 65535
    assert weighted_median([9], [1], out_of=3) == 0  # one of three permitted: no majority of them
    assert weighted_median([9, 9], [1, 1], out_of=3) == 9


def test_quorum_needs_two_thirds_and_a_score_half_the_permitted_weight() -> None:
    vs = tuple(ACCOUNTS[1:4])

    def run(revealed: int, scores: tuple[int, ...] = (9, 9, 9)) -> RoundResult:
        reveals = {v: Reveal((s,), 0, bytes(32)) for v, s in zip(vs[:revealed], scores, strict=False)}
        return compute_result(RoundInputs(3, (ACCOUNTS[0],), vs, (1, 1, 1), reveals, frozenset(), {}, 1000, 5000))
    assert not run(1).quorum and run(1).consensus == (0,)
    assert run(2).quorum and run(2).consensus == (9,) and run(2).pay == (500,)  # exactly 2/3: the third is absent
    assert run(2, (9, 20)).consensus == (9,)  # one of the two present cannot raise a score alone
    assert run(3).quorum and run(3).consensus == (9,) and run(3).pay == (500,)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(scores_st, st.integers(1, 10**6), st.booleans()), min_size=1, max_size=6),
       st.lists(scores_st, min_size=1, max_size=4))
def test_half_the_permitted_weight_never_raises_a_score_whoever_is_offline(
        honest: list[tuple[int, int, bool]], raised: list[int]) -> None:
    """A coalition holding at most half of the permitted weight (honest and coalition together),
    whatever it scores, never lifts a consensus above the best score of an honest validator that
    revealed, however many honest ones are offline."""
    honest_weight = sum(w for _, w, _ in honest)
    raised = raised[:honest_weight]
    coalition = [honest_weight // len(raised)] * len(raised)
    coalition[-1] += honest_weight - sum(coalition)  # exactly the honest weight: half of the permitted
    permitted = honest_weight + sum(coalition)
    present = [(sc, w) for sc, w, online in honest if online]
    column = [sc for sc, _ in present] + raised
    weights = [w for _, w in present] + coalition
    best_honest = max((sc for sc, _ in present), default=0)
    assert weighted_median(column, weights, permitted) <= best_honest


def test_credits_split_a_column_pool_by_weight_times_agreement() -> None:
    vs = tuple(ACCOUNTS[1:3])
    reveals = {vs[0]: Reveal((100,), 0, bytes(32)), vs[1]: Reveal((50,), 0, bytes(32))}
    res = compute_result(RoundInputs(1, (ACCOUNTS[0],), vs, (2, 1), reveals, frozenset(), {}, 1000, 0))
    assert res.consensus == (100,)  # 2 of 3 support 100
    assert res.credits == ((800, 200),)  # shares 2 x ONE and 1 x ONE/2 of the pool 1000
    assert res.minted == 1000


def test_no_columns_mint_nothing() -> None:
    vs = (ACCOUNTS[0],)
    res = compute_result(RoundInputs(1, (), vs, (5,), {vs[0]: Reveal((), 42, bytes(32))}, frozenset(), {}, 10**18, 5000))
    assert res.n == 0 and res.minted == 0 and res.validator_credit == (0,) and res.quorum and res.heldout_loss == 42


def test_heldout_loss_is_the_lower_median_of_revealed_losses() -> None:
    vs = tuple(ACCOUNTS[:4])
    reveals = {v: Reveal((), loss, bytes(32)) for v, loss in zip(vs, (40, 10, 30, 20), strict=True)}
    assert compute_result(RoundInputs(1, (), vs, (1,) * 4, reveals, frozenset(), {}, 0, 0)).heldout_loss == 20


def test_reputation_decays_towards_the_consensus() -> None:
    m, v = ACCOUNTS[0], ACCOUNTS[1]
    prev = {m: PrevEntry(4, 0, 1000, 7)}
    res = compute_result(RoundInputs(5, (m,), (v,), (1,), {v: Reveal((65535,), 0, bytes(32))}, frozenset(), prev, 100, 10_000))
    assert res.reputation == ((9 * 1000 + 65535) // 10,) and res.cumulative == (107,)


# ---- input validation ------------------------------------------------------------------------

M, V = ACCOUNTS[0], ACCOUNTS[1]
OK = dict(round=2, miners=(M,), validators=(V,), weights=(1,), reveals={V: Reveal((1,), 0, bytes(32))},
          forfeited=frozenset(), prev={}, emission=10, miner_share_bps=5000)


@pytest.mark.parametrize("change", [
    dict(reveals={V: Reveal((1, 2), 0, bytes(32))}),  # wrong length
    dict(reveals={ACCOUNTS[2]: Reveal((1,), 0, bytes(32))}),  # not a validator
    dict(weights=(1, 2)),
    dict(weights=(-1,)),
    dict(miners=(M.lower(),)),  # not checksummed
    dict(miners=(M, M)),
    dict(miners=(M,), validators=(M,), reveals={}),  # both roles
    dict(forfeited=frozenset({ACCOUNTS[3]})),
    dict(prev={M: PrevEntry(2, 0, 0, 0)}),  # not an earlier round
    dict(prev={ACCOUNTS[3]: PrevEntry(0, 0, 0, 0)}),
    dict(miner_share_bps=10_001),
    dict(emission=2**256),
    dict(miners=("0x1234",)),
])
def test_malformed_inputs_raise_result_error(change: dict) -> None:
    with pytest.raises(ResultError):
        RoundInputs(**{**OK, **change})


@pytest.mark.parametrize("make", [
    lambda: Reveal((65536,), 0, bytes(32)),
    lambda: Reveal((-1,), 0, bytes(32)),
    lambda: Reveal((1,), 0, bytes(31)),
    lambda: PrevEntry(0, 0, 65536, 0),
])
def test_malformed_reveals_and_entries_raise_result_error(make) -> None:
    with pytest.raises(ResultError):
        make()


def test_well_formed_inputs_are_accepted() -> None:
    assert RoundInputs(**OK).n == 1
