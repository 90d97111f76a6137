"""Absence costs the absent (issue 28 item 4): a validator that stays permitted but never reveals
earns nothing, the others settle every round without it, and after `absence_rounds` ended rounds
in a row anyone may end its eligibility (Disputes.retire_absent); it comes back by staking again.
Honest validators are never retired: one reveal in the window, a newcomer, or a round where
nobody revealed keeps a validator in."""

from __future__ import annotations

import boa
from conftest import TOKEN, Params, World, keyed_world, make_world

kworld_base = keyed_world(validator_stakes=(200 * TOKEN,) * 3)


def play(w: World, rnd: int, revealers) -> None:
    """Round `rnd` with only `revealers` committing, revealing and signing; it settles and ends."""
    w.to_result(rnd, {v: [1000, 2000, 3000] for v in revealers})
    settled = w.settle(rnd)
    assert settled.result.quorum and all(p > 0 for p in settled.result.pay)
    w.finalize(w.post(rnd, settled, signers=revealers))
    for v, credit in zip(settled.inputs.validators, settled.result.validator_credit, strict=True):
        assert (credit > 0) == (v in [str(r) for r in revealers]), (v, credit)  # the absent earn no dividend


def witnesses(w: World, n: int = 3) -> list:
    return [w.validators[0]] * n  # revealed in every round these tests play


def test_an_absent_validator_earns_nothing_and_is_retired_after_three_rounds(kworld: World):
    w = kworld
    present, absent = w.validators[:2], w.validators[2]
    for rnd in range(2):
        play(w, rnd, present)
    with boa.reverts("disputes: too few rounds"):
        w.stack.disputes.retire_absent(absent, witnesses(w))
    play(w, 2, present)
    with boa.reverts("disputes: revealed in one of the rounds"):
        w.stack.disputes.retire_absent(present[0], witnesses(w))
    w.stack.disputes.retire_absent(absent, witnesses(w), sender=present[0])  # anyone may
    assert w.st.eligible_role(absent) == 0
    assert w.st.staked(absent) == 200 * TOKEN  # it keeps its stake
    with boa.reverts("staking: not an eligible validator"):
        w.stack.disputes.retire_absent(absent, witnesses(w))
    play(w, 3, present)  # round 3 opened before the retirement: it was still permitted there
    assert sorted(w.s.validators_of(4)) == sorted(present)
    # it comes back by staking again
    w.t.approve(w.st.address, TOKEN, sender=absent)
    w.st.stake(TOKEN, sender=absent)
    assert w.st.eligible_role(absent) == 2
    play(w, 4, present)
    assert absent in w.s.validators_of(5)


def test_one_reveal_in_the_window_keeps_a_validator(kworld: World):
    w = kworld
    play(w, 0, w.validators)
    play(w, 1, w.validators[:2])
    play(w, 2, w.validators[:2])
    with boa.reverts("disputes: revealed in one of the rounds"):
        w.stack.disputes.retire_absent(w.validators[2], witnesses(w))
    play(w, 3, w.validators[:2])
    w.stack.disputes.retire_absent(w.validators[2], witnesses(w))  # rounds 1-3 absent


def test_a_round_nobody_revealed_never_counts_as_an_absence(kworld: World):
    w = kworld
    play(w, 0, w.validators[:2])
    play(w, 1, w.validators[:2])
    w.to_scoring(2)  # nobody scores round 2: it falls back
    w.fall_back(2)
    with boa.reverts("disputes: witness did not reveal"):  # nobody revealed in round 2
        w.stack.disputes.retire_absent(w.validators[2], witnesses(w))
    with boa.reverts("disputes: one witness per round"):
        w.stack.disputes.retire_absent(w.validators[2], witnesses(w, 2))


def test_only_disputes_retires_a_validator(kworld: World):
    with boa.reverts("staking: only disputes"):
        kworld.st.retire(kworld.validators[2], sender=kworld.validators[0])


def test_absence_rounds_zero_never_retires():
    w = make_world(Params(absence_rounds=0), validator_stakes=(200 * TOKEN,) * 3)
    with boa.reverts("disputes: absence never retires"):
        w.stack.disputes.retire_absent(w.validators[2], witnesses(w))
