"""Who checks a miner (protocol/core/settlement/class_checks.py) and what that does to a round's consensus.

A column is decided by the validators holding its miner's class when they hold at least the
class minimum and 2/3 of the round's stake; else everyone decides it, in tolerance mode. Attacks:
validators outside the class outvoting its holders, a class's holders silently absent, a single
under-staked holder deciding a class alone, and a coalition of a third of the stake or less
registering a class nobody else holds to decide it (the fief: any coalition that moves a score
holds over 1/3 of all stake, whatever the classes).
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.core.crypto.keccak import checksum_address, keccak256
from protocol.core.errors import ResultError
from protocol.core.settlement.class_checks import (
    CheckMode,
    check_mode,
    class_checkers,
    column_deciders,
    covered,
    effective_classes,
    holds_class,
)
from protocol.core.settlement.result import compute_result
from protocol.core.settlement.result_inputs import Reveal, RoundInputs

ACCOUNTS = [checksum_address(keccak256(b"class account %d" % k)[:20]) for k in range(8)]
A, B, C = 1, 2, 4
T = 10**18


def test_an_unset_class_set_is_class_0():
    assert effective_classes(0) == 1 and effective_classes(B | C) == B | C
    assert holds_class(0, A) and holds_class(A, 0) and not holds_class(0, B)
    assert holds_class(A | B, B) and not holds_class(A | C, B)


def test_the_holders_decide_when_they_carry_the_minimum_and_two_thirds_else_everyone():
    weights = [T, T, 4 * T]
    checkers = class_checkers(B, [A, A, B])
    assert checkers == (False, False, True)
    assert covered(weights, checkers, T) and column_deciders(weights, checkers, T) == checkers  # 4 of 6
    assert not covered(weights, checkers, 4 * T + 1)  # below the class minimum
    assert column_deciders(weights, checkers, 4 * T + 1) == (True, True, True)
    nobody = class_checkers(C, [A, A, B])
    assert not covered(weights, nobody, 0)  # no holder at all: tolerance even without a minimum
    assert column_deciders(weights, nobody, 0) == (True, True, True)


def test_a_class_held_by_under_two_thirds_of_the_stake_is_everyones():
    """The largest validator alone, at half of the stake, above any class minimum, registers a
    class nobody else runs: the class is checked by everyone in tolerance mode."""
    weights = [3 * T, 2 * T, T]
    fief = class_checkers(B, [B, A, A])
    assert not covered(weights, fief, T) and column_deciders(weights, fief, T) == (True, True, True)
    exactly = class_checkers(B, [B, A, B])  # 4 of 6: exactly 2/3 is enough
    assert covered([3 * T, 2 * T, T], exactly, T)
    assert not covered([3 * T, 2 * T + 1, T], exactly, T)


@pytest.mark.parametrize(("own", "miner", "minimum", "mode"), [
    (A, A, T, CheckMode.EXACT),  # its own class, covered (5 of 6)
    (B, A, T, CheckMode.SKIP),  # another covered class: its holders decide
    (B, B, T, CheckMode.TOLERANCE),  # B's holder has 1 of 6: everyone, within δ
    (A, B, T, CheckMode.TOLERANCE),
    (A, C, T, CheckMode.TOLERANCE),  # nobody holds C
    (A, A, 6 * T, CheckMode.TOLERANCE),  # A's holders have too little stake for the class minimum
])
def test_check_mode(own, miner, minimum, mode):
    assert check_mode(own, miner, [A, A, B], [3 * T, 2 * T, T], minimum) is mode


def inputs(scores: dict[str, tuple[int, ...]], **classes) -> RoundInputs:
    miners, validators = tuple(ACCOUNTS[:2]), tuple(ACCOUNTS[4:7])
    reveals = {v: Reveal(s, 500_000, b"\x01" * 32) for v, s in scores.items()}
    return RoundInputs(1, miners, validators, (3 * T, 2 * T, T), reveals, frozenset(), {}, 1000 * T, 7000, **classes)


V0, V1, V2 = ACCOUNTS[4:7]
# miner 0 runs A (held by V0 and V1: 5 of 6), miner 1 runs B (held by V0 and V2: 4 of 6)
MIXED = {"miner_classes": (A, B), "validator_classes": (A | B, A, B), "min_class_weight": T}
# B held by V2 alone (1 of 6): B is checked by everyone
RARE = {"miner_classes": (A, B), "validator_classes": (A, A, B), "min_class_weight": T}


def test_a_class_is_scored_by_its_holders_and_an_outsiders_score_does_not_count():
    # V1 does not run B: what it reveals for miner 1 is ignored, high or low
    for outsider in (0, 65535):
        res = compute_result(inputs({V0: (40000, 30000), V1: (30000, outsider), V2: (9, 30000)}, **MIXED))
        assert res.consensus == (40000, 30000), outsider  # miner 0: V0 and V1 decide, V2's 9 does not count


def test_validators_outside_a_class_earn_no_credit_for_its_column():
    res = compute_result(inputs({V0: (40000, 30000), V1: (30000, 0), V2: (9, 30000)}, **MIXED))
    assert res.credits[1][1] == 0 and res.credits[1][0] > 0 and res.credits[1][2] > 0
    assert res.credits[0][2] == 0  # V2 does not hold A


def test_a_class_whose_holders_did_not_reveal_pays_nothing_that_round():
    # V2 (B) reveals; V0 (A and B) does not: B's column has 1 of its 4 revealed, and so does the round
    res = compute_result(inputs({V1: (30000, 0), V2: (9, 45000)}, **MIXED))
    assert not res.quorum and res.consensus == (0, 0)


def test_a_rare_class_holder_cannot_decide_its_class_alone():
    scores = {V0: (40000, 20000), V1: (30000, 20000), V2: (9, 65535)}  # tolerance: all score it
    res = compute_result(inputs(scores, **RARE))
    assert res.consensus[1] == 20000  # V2's 65535 is a minority of everyone's stake
    assert all(c > 0 for c in res.credits[1][:2])


def test_class_sets_must_match_the_accounts():
    with pytest.raises(ResultError, match="miner_classes"):
        inputs({}, miner_classes=(A,), validator_classes=(A, A, B))
    with pytest.raises(ResultError, match="validator_classes"):
        inputs({}, miner_classes=(A, B), validator_classes=(A,))
    with pytest.raises(ResultError, match="min_class_weight"):
        dataclasses.replace(inputs({}, **MIXED), min_class_weight=-1)


@st.composite
def class_coalitions(draw):
    """A round of 3 to 6 validators with any stakes and class sets, one miner of any class, and a
    coalition of them."""
    n = draw(st.integers(3, 6))
    weights = draw(st.lists(st.integers(1, 10), min_size=n, max_size=n))
    masks = draw(st.lists(st.integers(1, 7), min_size=n, max_size=n))
    coalition = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    return weights, masks, draw(st.integers(1, 7)), coalition


@settings(max_examples=400, deadline=None)
@given(class_coalitions(), st.integers(1, 65535), st.integers(0, 65535))
def test_under_a_third_of_the_stake_never_moves_a_score_whatever_the_classes(round_, honest, lie):
    """The fief attack: a coalition registers any classes it likes (a class nobody else runs, a
    class it shares) and reveals `lie` for a miner whose honest score is `honest`. Below 1/3 of
    the stake it moves nothing; at exactly 1/3 it cannot raise the score."""
    weights, masks, miner_mask, coalition = round_
    total, bad = sum(weights), sum(w for w, c in zip(weights, coalition, strict=True) if c)
    validators = tuple(ACCOUNTS[:len(weights)])
    deciders = column_deciders(weights, class_checkers(miner_mask, masks), 0)
    reveals = {v: Reveal((lie if liar else honest if decides else 0,), 500_000, b"\x01" * 32)
               for v, liar, decides in zip(validators, coalition, deciders, strict=True)}
    res = compute_result(RoundInputs(1, (ACCOUNTS[7],), validators, tuple(w * T for w in weights), reveals,
                                     frozenset(), {}, 1000 * T, 7000, miner_classes=(miner_mask,),
                                     validator_classes=tuple(masks), min_class_weight=0))
    if 3 * bad < total:
        assert res.consensus == (honest,)
    elif 3 * bad == total and lie > honest:
        assert res.consensus[0] <= honest
