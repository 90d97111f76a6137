"""Hardware classes on chain: fixed once staked, who holds a miner's class, and class-bound fraud reports.

A miner is judged by the validators holding its class (docs/PROTOCOL.md §12.2) when they hold
the class minimum and 2/3 of the round's stake: they alone may report it and vote, and the quorum
counts their stake, so such a miner is neither unslashable for lack of quorum nor open to reports
from validators that cannot replay it. A class held by less is judged by everyone, and only for
derivation faults: no holder of a third of the stake or less judges a class alone.
"""

import boa
import pytest
from conftest import (
    KIND_DERIVATION,
    KIND_REPLAY,
    KIND_UNAVAILABLE,
    MINER,
    MULTIADDR,
    NODE_KEY,
    SIG,
    STATUS_CONFIRMED,
    STATUS_REJECTED,
    TOKEN,
    VALIDATOR,
    VOTE_CONFIRM,
    VOTE_REJECT,
    Params,
    World,
    deploy_stack,
    join,
)

EVIDENCE = b"\x0a" * 32
A, B, C = 1, 2, 4  # three permitted classes: C is held by no validator


@pytest.fixture
def mixed() -> World:
    """Validators: vA 200 (class A), vB 600 (classes A and B), vB2 200 (class B); miners of A, B
    and C. The class minimum is twice the validator minimum (400); A's and B's holders have 800
    of the 1000, so A and B are covered, and C is not."""
    stack = deploy_stack()
    p = stack.params
    miners = [join(stack, MINER, p.min_miner_stake + 60 * TOKEN, classes=c) for c in (A, B, C)]
    validators = [join(stack, VALIDATOR, s * TOKEN, classes=c) for s, c in ((200, A), (600, A | B), (200, B))]
    stack.settlement.start()
    return World(stack, miners, validators)


def test_classes_are_fixed_from_the_first_stake_on():
    stack = deploy_stack()
    st = stack.staking
    v = join(stack, VALIDATOR, 0, funds=1000 * TOKEN, classes=A | B)
    st.set_hardware_classes(B, sender=v)  # not staked yet: it may still change
    st.stake(stack.params.min_validator_stake, sender=v)
    assert st.classes_fixed(v) and st.hardware_classes(v) == B
    with boa.reverts("staking: classes are fixed once staked"):
        st.set_hardware_classes(A, sender=v)
    st.request_unbond(stack.params.min_validator_stake, sender=v)
    boa.env.time_travel(seconds=stack.params.unbonding_delay)
    st.withdraw(sender=v)  # nothing staked any more: still fixed (rounds it took part in read it)
    with boa.reverts("staking: classes are fixed once staked"):
        st.set_hardware_classes(A, sender=v)


def test_class_checkers_name_the_holders_and_an_unset_class_is_class_0():
    stack = deploy_stack()
    st = stack.staking
    unset_miner = join(stack, MINER, 0)
    b_miner = join(stack, MINER, 0, classes=B)
    vs = [join(stack, VALIDATOR, 0, classes=c) for c in (A, B, A | B)]
    unset_validator = join(stack, VALIDATOR, 0)
    assert st.class_checkers(b_miner, vs + [unset_validator]) == [False, True, True, False]
    assert st.class_checkers(unset_miner, vs + [unset_validator]) == [True, False, True, True]
    assert st.min_class_stake() == 2 * stack.params.min_validator_stake  # one minimum validator never suffices


def test_a_report_against_a_minority_class_miner_is_decided_by_its_class(mixed: World):
    d, st, (_, m_b, _), (v_a, v_b, v_b2) = mixed.d, mixed.st, mixed.miners, mixed.validators
    mixed.to_scoring(0)
    with boa.reverts("disputes: reporter does not hold the miner's class"):
        d.report_fraud(0, m_b, KIND_REPLAY, 3, EVIDENCE, SIG, sender=v_a)
    rid = d.report_fraud(0, m_b, KIND_REPLAY, 3, EVIDENCE, SIG, sender=v_b2)
    r = d.reports(rid)
    assert (r.voter_weight, r.voter_count, r.class_bound) == (800 * TOKEN, 2, True)
    with boa.reverts("disputes: voter does not hold the miner's class"):
        d.vote_fraud(rid, VOTE_REJECT, sender=v_a)  # it cannot replay B: its vote would be noise
    d.vote_fraud(rid, VOTE_CONFIRM, sender=v_b)
    before = st.staked(m_b)
    # B's holders are all who may vote: the report resolves at once and confirms
    assert d.resolve_fraud(rid) == STATUS_CONFIRMED
    assert st.staked(m_b) < before


def test_a_false_report_in_a_class_is_rejected_by_its_peers_and_costs_the_bond(mixed: World):
    d, t, (_, m_b, _), (_, v_b, v_b2) = mixed.d, mixed.t, mixed.miners, mixed.validators
    mixed.to_scoring(0)
    before, stake = t.balanceOf(v_b2), mixed.st.staked(m_b)
    rid = d.report_fraud(0, m_b, KIND_REPLAY, 3, EVIDENCE, SIG, sender=v_b2)  # e.g. it replays under another class
    d.vote_fraud(rid, VOTE_REJECT, sender=v_b)  # the larger holder replays it and finds no fault
    assert d.resolve_fraud(rid) == STATUS_REJECTED
    assert t.balanceOf(v_b2) == before - mixed.stack.params.report_bond
    assert mixed.st.staked(m_b) == stake


def test_a_miner_of_a_class_nobody_holds_can_only_be_reported_for_derivation_by_anyone(mixed: World):
    d, st, (_, _, m_c, ), (v_a, v_b, v_b2) = mixed.d, mixed.st, mixed.miners, mixed.validators
    mixed.to_scoring(0)
    for kind in (KIND_REPLAY, KIND_UNAVAILABLE):  # tolerance checks are no exact evidence
        with boa.reverts("disputes: only derivation reports without exact checkers"):
            d.report_fraud(0, m_c, kind, 3, EVIDENCE, SIG, sender=v_a)
    rid = d.report_fraud(0, m_c, KIND_DERIVATION, 3, EVIDENCE, SIG, sender=v_b)
    r = d.reports(rid)
    assert (r.voter_weight, r.voter_count, r.class_bound) == (1000 * TOKEN, 3, False)
    d.vote_fraud(rid, VOTE_CONFIRM, sender=v_a)
    d.vote_fraud(rid, VOTE_CONFIRM, sender=v_b2)
    before = st.staked(m_c)
    assert d.resolve_fraud(rid) == STATUS_CONFIRMED
    assert st.staked(m_c) < before


def class_pair(min_class_stake: int, a_stake: int, b_stake: int) -> tuple[World, str]:
    """A validator of class A and one of class B at the given stakes, and a miner of class B."""
    stack = deploy_stack(Params(min_class_stake=min_class_stake * TOKEN))
    p = stack.params
    m_b = join(stack, MINER, p.min_miner_stake, classes=B)
    join(stack, MINER, p.min_miner_stake, classes=A)
    v_a = join(stack, VALIDATOR, a_stake * TOKEN, classes=A)
    v_b = join(stack, VALIDATOR, b_stake * TOKEN, classes=B)
    stack.settlement.start()
    w = World(stack, [m_b], [v_a, v_b])
    w.to_scoring(0)
    assert stack.staking.class_checkers(m_b, [v_a, v_b]) == [False, True]
    return w, m_b


def test_a_class_at_the_stake_minimum_and_two_thirds_is_class_bound():
    w, m_b = class_pair(400, 200, 400)  # 400 of B: the minimum, and exactly 2/3 of 600
    (_, v_b) = w.validators
    rid = w.d.report_fraud(0, m_b, KIND_REPLAY, 3, EVIDENCE, SIG, sender=v_b)
    assert w.d.reports(rid).class_bound


@pytest.mark.parametrize(("minimum", "a_stake", "b_stake"), [
    (401, 200, 400),  # below the class minimum
    (400, 201, 400),  # below 2/3 of the round's stake
    (200, 500, 400),  # the fief: far above the minimum, 4/9 of the stake
])
def test_a_class_held_by_too_little_stake_is_judged_by_everyone(minimum, a_stake, b_stake):
    w, m_b = class_pair(minimum, a_stake, b_stake)
    (v_a, v_b) = w.validators
    with boa.reverts("disputes: only derivation reports without exact checkers"):
        w.d.report_fraud(0, m_b, KIND_REPLAY, 3, EVIDENCE, SIG, sender=v_b)
    rid = w.d.report_fraud(0, m_b, KIND_DERIVATION, 3, EVIDENCE, SIG, sender=v_a)
    r = w.d.reports(rid)
    assert (r.voter_weight, r.voter_count, r.class_bound) == ((a_stake + b_stake) * TOKEN, 2, False)


def test_registration_before_staking_still_sets_classes():
    stack = deploy_stack()
    st = stack.staking
    m = boa.env.generate_address()
    st.register(MINER, NODE_KEY, MULTIADDR, SIG, sender=m)
    st.set_hardware_classes(C, sender=m)
    assert st.hardware_classes(m) == C and not st.classes_fixed(m)
