"""`certifies`: which signers make a certificate the Results contract accepts (the contract's own
check is tested in tests/contracts/test_results.py)."""

from __future__ import annotations

from result_strategies import ACCOUNTS

from protocol.core.settlement.certificate import certifies
from protocol.core.settlement.result_inputs import Reveal, RoundInputs

MINER = ACCOUNTS[0]


def inputs(weights: tuple[int, ...], revealed: int) -> RoundInputs:
    vs = tuple(ACCOUNTS[1:1 + len(weights)])
    reveals = {v: Reveal((9,), 0, bytes(32)) for v in vs[:revealed]}
    return RoundInputs(3, (MINER,), vs, weights, reveals, frozenset(), {}, 1000, 5000)


def test_two_of_three_equal_validators_certify_without_the_absent_third() -> None:
    inp = inputs((1, 1, 1), revealed=2)
    a, b, absent = inp.validators
    assert certifies(inp, [a, b], inp.validators)
    assert not certifies(inp, [a, absent], inp.validators)  # one that never revealed makes up nothing


def test_a_withheld_share_is_ridden_out_from_four_validators_up() -> None:
    four, three = inputs((1, 1, 1, 1), revealed=4), inputs((1, 1, 1), revealed=3)
    assert certifies(four, four.validators[:3], four.validators)
    assert not certifies(three, three.validators[:2], three.validators)  # exactly 2/3 of the revealed stake


def test_without_the_quorum_signers_need_more_than_two_thirds_of_all() -> None:
    inp = inputs((1, 1, 1), revealed=1)
    assert not certifies(inp, inp.validators[:2], inp.validators)
    assert certifies(inp, inp.validators, inp.validators)


def test_at_most_a_third_of_the_revealed_stake_never_certifies() -> None:
    inp = inputs((3, 1, 1, 1), revealed=4)  # 6 revealed
    assert not certifies(inp, inp.validators[:1], inp.validators)  # 3 of 6: half
    assert not certifies(inp, inp.validators[1:], inp.validators)  # 3 of 6
    assert certifies(inp, inp.validators[:3], inp.validators)  # 5 of 6


def test_a_validator_without_a_key_never_signs_nor_counts_in_the_measure() -> None:
    inp = inputs((1, 1, 1, 1), revealed=4)
    a, b, c, keyless = inp.validators
    keyed = [a, b, c]
    assert certifies(inp, [a, b, c, keyless], keyed)  # 3 of the 3 keyed revealed
    assert not certifies(inp, [a, b, keyless], keyed)  # 2 of 3: the keyless one signed nothing
