"""A round's result with check committees (protocol/core/settlement/column_weights.py): a column
is decided by its miner's committee, each member by its seats; scores from outside the committee
move nothing; a silent member's seat passes to a backup; credits go to the members only; and
without committees (size 0) the result is what it was."""

from __future__ import annotations

import dataclasses

import pytest
from result_strategies import ACCOUNTS

from protocol.core.errors import ResultError
from protocol.core.settlement.committees import committee, drawn_seats
from protocol.core.settlement.result import compute_result
from protocol.core.settlement.result_inputs import Reveal, RoundInputs

SEED = bytes(range(32))
VALIDATORS = tuple(ACCOUNTS[20:32])  # twelve equal validators
MINERS = tuple(ACCOUNTS[:8])
HONEST = 40_000


def inputs(scores: dict[str, int] | None = None, silent: frozenset[str] = frozenset(), size: int = 3) -> RoundInputs:
    """Every validator scores every miner HONEST unless `scores` says otherwise."""
    reveals = {v: Reveal(tuple((scores or {}).get(v, HONEST) for _ in MINERS), 5, bytes(32))
               for v in VALIDATORS if v not in silent}
    return RoundInputs(1, MINERS, VALIDATORS, (1,) * len(VALIDATORS), reveals, frozenset(), {}, 1200, 5000,
                       committee_size=size, seed=SEED)


def members(column: int, silent: frozenset[str] = frozenset()) -> tuple[int, ...]:
    revealed = [v not in silent for v in VALIDATORS]
    return committee(SEED, bytes.fromhex(MINERS[column][2:]), [1] * len(VALIDATORS), 3, revealed)


def test_scores_from_outside_a_miners_committee_move_nothing() -> None:
    base = compute_result(inputs())
    assert base.consensus == (HONEST,) * len(MINERS)
    outsiders = {VALIDATORS[j]: 65_535 for j in range(len(VALIDATORS)) if j not in members(0)}
    assert len(outsiders) >= 9  # 3 seats of 12 validators: nine or more outside
    res = compute_result(inputs(outsiders))
    assert res.consensus[0] == HONEST  # nine validators of twelve, three quarters of the stake, cannot lift it


@pytest.mark.parametrize("column", [0, 1])  # column 0: one validator holds two seats; column 1: three hold one
def test_a_committee_majority_decides_its_column_and_a_minority_does_not(column: int) -> None:
    seats = members(column)
    ranked = sorted(set(seats), key=seats.count, reverse=True)
    majority = ranked[:1] if seats.count(ranked[0]) >= 2 else ranked[:2]  # more than 1.5 of 3 seats
    res = compute_result(inputs({VALIDATORS[j]: 65_535 for j in majority}))
    assert res.consensus[column] == 65_535  # the capture the audits answer (PROTOCOL §10.8)
    minority = [j for j in ranked if seats.count(j) == 1][:1]
    res = compute_result(inputs({VALIDATORS[j]: 65_535 for j in minority}))
    assert res.consensus[column] == HONEST


def test_credits_go_to_the_committee_alone_by_seat() -> None:
    res = compute_result(inputs())
    pool = 600 // len(MINERS)
    for i in range(len(MINERS)):
        seats = members(i)
        paid = {j for j, credit in enumerate(res.credits[i]) if credit}
        assert paid == set(seats)
        for j in paid:
            assert res.credits[i][j] == pool * seats.count(j) // 3


def test_a_silent_members_seat_passes_to_a_backup() -> None:
    seats = members(0)
    silent = frozenset({VALIDATORS[seats[0]]})
    backup = members(0, silent)
    assert len(backup) == 3 and seats[0] not in backup
    res = compute_result(inputs(silent=silent))
    assert res.quorum and res.consensus[0] == HONEST
    assert {j for j, c in enumerate(res.credits[0]) if c} == set(backup)


def test_without_committees_every_decider_counts_by_stake() -> None:
    with_none = compute_result(inputs(size=0))
    assert all(c == 600 // len(MINERS) // 12 for column in with_none.credits for c in column)
    moved = compute_result(inputs({v: 65_535 for v in VALIDATORS[:7]}, size=0))
    assert moved.consensus == (65_535,) * len(MINERS)  # seven of twelve: a stake majority moves every column


@pytest.mark.parametrize("size", [12, 16])
def test_a_committee_is_not_in_force_over_as_many_deciders_as_seats_or_fewer(size: int) -> None:
    """Twelve validators and committees of 12 or 16 seats: every decider counts by stake, as
    without committees, and no draw leaves any of them out."""
    assert compute_result(inputs(size=size)) == compute_result(inputs(size=0))
    moved = compute_result(inputs({v: 65_535 for v in VALIDATORS[:7]}, size=size))
    assert moved.consensus == (65_535,) * len(MINERS)
    assert compute_result(inputs(size=11)) != compute_result(inputs(size=0))  # eleven seats of twelve: drawn


@pytest.mark.parametrize("change", [{"committee_size": 17}, {"committee_size": -1}, {"seed": b"short"}])
def test_a_committee_needs_a_size_the_chain_bounds_and_a_32_byte_seed(change) -> None:
    with pytest.raises(ResultError):
        dataclasses.replace(inputs(), **change)


@pytest.mark.parametrize("size", [3, 0])
def test_a_caught_liars_scores_are_void_and_its_seats_pass_to_backups(size: int) -> None:
    """A validator forfeited by a confirmed report (a `wrong_score` one) lies in vain: its
    scores count in no column; with committees its seats pass to the next backups."""
    seats = members(0)
    liar = VALIDATORS[max(set(seats), key=seats.count)]
    lie = {liar: 65_535} if size else {v: 65_535 for v in VALIDATORS[:7]}  # without committees: a stake majority
    caught = dataclasses.replace(inputs(lie, size=size), forfeited=frozenset(lie))
    res = compute_result(caught)
    assert res.quorum and res.consensus[0] == HONEST  # without committees the five honest decide alone
    assert all(res.credits[i][VALIDATORS.index(v)] == 0 for v in lie for i in range(len(MINERS)))
    if size:  # the liar stays in the draw: every seat falls where the checkers saw it fall
        decided = {j for j, w in enumerate(caught.column_weights(0).weights) if w}
        assert VALIDATORS.index(liar) not in decided
        assert decided <= set(drawn_seats(SEED, bytes.fromhex(MINERS[0][2:]), [1] * len(VALIDATORS), 3))
