"""Who checks a miner (protocol/core/settlement/class_checks.py) and what that does to a round's consensus.

A column is decided by the validators holding its miner's class when they hold at least the
class minimum; else everyone decides it, in tolerance mode. Attacks: validators outside the class
outvoting its holders, a minority-class miner scored 0 for lack of support, a class's holders
silently absent, and a single under-staked holder deciding a class alone.
"""

from __future__ import annotations

import dataclasses

import pytest

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


def test_the_holders_decide_when_they_carry_the_minimum_else_everyone():
    weights = [3 * T, 2 * T, T]
    checkers = class_checkers(B, [A, A, B])
    assert checkers == (False, False, True)
    assert covered(weights, checkers, T) and column_deciders(weights, checkers, T) == checkers
    assert not covered(weights, checkers, T + 1)
    assert column_deciders(weights, checkers, T + 1) == (True, True, True)
    nobody = class_checkers(C, [A, A, B])
    assert not covered(weights, nobody, 0)  # no holder at all: tolerance even without a minimum
    assert column_deciders(weights, nobody, 0) == (True, True, True)


@pytest.mark.parametrize(("own", "miner", "minimum", "mode"), [
    (A, A, T, CheckMode.EXACT),  # its own class, covered
    (A, B, T, CheckMode.SKIP),  # another covered class: its holders decide
    (B, B, T, CheckMode.EXACT),
    (A, C, T, CheckMode.TOLERANCE),  # nobody holds C
    (B, B, 2 * T, CheckMode.TOLERANCE),  # B's holder has too little stake: everyone, within δ
    (A, B, 2 * T, CheckMode.TOLERANCE),
])
def test_check_mode(own, miner, minimum, mode):
    assert check_mode(own, miner, [A, A, B], [3 * T, 2 * T, T], minimum) is mode


def inputs(scores: dict[str, tuple[int, ...]], **classes) -> RoundInputs:
    miners, validators = tuple(ACCOUNTS[:2]), tuple(ACCOUNTS[4:7])
    reveals = {v: Reveal(s, 500_000, b"\x01" * 32) for v, s in scores.items()}
    return RoundInputs(1, miners, validators, (3 * T, 2 * T, T), reveals, frozenset(), {}, 1000 * T, 7000, **classes)


V0, V1, V2 = ACCOUNTS[4:7]
# miner 0 runs A (held by V0 and V1), miner 1 runs B (held by V2 alone, the smallest stake)
MIXED = {"miner_classes": (A, B), "validator_classes": (A, A, B), "min_class_weight": T}


def test_a_minority_class_miner_is_scored_by_its_holder_not_zeroed_by_the_majority():
    # V0 and V1 do not run B: they reveal 0 for miner 1 (the chain ignores it)
    res = compute_result(inputs({V0: (40000, 0), V1: (30000, 0), V2: (9, 50000)}, **MIXED))
    assert res.consensus == (40000, 50000)  # miner 0: V0's 3 of 5 decide, V2's 9 does not count; miner 1: V2 alone
    blind = compute_result(inputs({V0: (40000, 0), V1: (30000, 0), V2: (9, 50000)}))
    assert blind.consensus[1] == 0  # without classes the majority's zeros would win


def test_validators_outside_a_class_earn_no_credit_for_its_column():
    res = compute_result(inputs({V0: (40000, 0), V1: (30000, 0), V2: (9, 50000)}, **MIXED))
    assert res.credits[1][0] == res.credits[1][1] == 0 and res.credits[1][2] > 0
    assert res.credits[0][2] == 0  # V2 does not hold A


def test_a_class_whose_holders_did_not_reveal_pays_nothing_that_round():
    res = compute_result(inputs({V0: (40000, 45000), V1: (30000, 45000)}, **MIXED))
    assert res.quorum  # 5 of 6 revealed
    assert res.consensus == (40000, 0)  # B's only holder is silent: its column has no quorum


def test_a_holder_below_the_minimum_cannot_decide_its_class_alone():
    scores = {V0: (40000, 20000), V1: (30000, 20000), V2: (9, 65535)}  # tolerance: all score it
    res = compute_result(inputs(scores, **{**MIXED, "min_class_weight": 2 * T}))
    assert res.consensus[1] == 20000  # V2's 65535 is a minority of everyone's stake
    assert all(c > 0 for c in res.credits[1][:2])


def test_class_sets_must_match_the_accounts():
    with pytest.raises(ResultError, match="miner_classes"):
        inputs({}, miner_classes=(A,), validator_classes=(A, A, B))
    with pytest.raises(ResultError, match="validator_classes"):
        inputs({}, miner_classes=(A, B), validator_classes=(A,))
    with pytest.raises(ResultError, match="min_class_weight"):
        dataclasses.replace(inputs({}, **MIXED), min_class_weight=-1)
