"""A round's result from its chain facts (docs/PROTOCOL.md §11.2): consensus, pay, credits, history.

Integer arithmetic only, each floor division where the spec writes it: a Challenges contract
recomputes any one value from the same calldata and must get the same number.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from protocol.core.errors import ResultError
from protocol.core.settlement.result_inputs import RoundInputs

ONE = 10**18  # full agreement, fixed point


@dataclass(frozen=True)
class RoundResult:
    n: int
    quorum: bool
    consensus: tuple[int, ...]  # c_i per column
    pay: tuple[int, ...]  # pay_i per column
    reputation: tuple[int, ...]  # rep_i per column (uint16)
    cumulative: tuple[int, ...]  # cum_i per column
    credits: tuple[tuple[int, ...], ...]  # credits[i][j] = credit_ji, per column per validator
    validator_credit: tuple[int, ...]  # credit_j per validator
    validator_cumulative: tuple[int, ...]  # cum_j per validator
    minted: int
    heldout_loss: int  # lower median of the revealed losses, 1e6 = 1.0


def weighted_median(scores: Sequence[int], weights: Sequence[int], out_of: int | None = None) -> int:
    """The largest score x with more than half of `out_of` (default: the weights' sum) at or
    above it; 0 if none.

    Strict majority: exactly half the weight cannot raise the result. A column passes its
    deciders' whole weight, revealed or not, so that no coalition of at most half of it moves a
    score whoever else is offline (docs/PROTOCOL.md §11.2).
    """
    if len(scores) != len(weights):
        raise ResultError(f"{len(scores)} scores for {len(weights)} weights")
    total = sum(weights) if out_of is None else out_of
    support = 0
    ranked = sorted(zip(scores, weights, strict=True), reverse=True)
    for k, (score, weight) in enumerate(ranked):
        support += weight
        last_of_value = k + 1 == len(ranked) or ranked[k + 1][0] != score
        if last_of_value and support * 2 > total:
            return score
    return 0


def has_quorum(revealed_weight: int, total_weight: int) -> bool:
    """At least 2/3 of the weight revealed (and some): two of three equal validators settle a
    round without the third."""
    return revealed_weight > 0 and 3 * revealed_weight >= 2 * total_weight


def agreement(score: int, consensus: int) -> int:
    """How close a validator's score is to consensus, ONE = equal (both 0 counts as equal)."""
    hi, lo = max(score, consensus), min(score, consensus)
    return ONE if hi == 0 else ONE * lo // hi


def lower_median(values: Sequence[int]) -> int:
    """Element (k-1)//2 of the sorted values; 0 for none."""
    ordered = sorted(values)
    return ordered[(len(ordered) - 1) // 2] if ordered else 0


@dataclass(frozen=True)
class _Column:
    """Who decides one column, how much each counts, and whether they reach its quorum."""

    weights: tuple[int, ...]  # per validator: stake among the deciders, or committee seats; 0: not a decider
    quorum: bool  # the round's quorum and >= 2/3 of the column's total revealed
    total: int  # the deciders' weight, revealed or not (or the committee's seats): what a consensus needs half of


def _column_of(inputs: RoundInputs, quorum: bool, column: int) -> _Column:
    weights = inputs.column_weights(column)
    revealed = sum(w for v, w in zip(inputs.validators, weights.weights, strict=True) if inputs.counted(v))
    return _Column(weights.weights, quorum and has_quorum(revealed, weights.total), weights.total)


def _consensus_of(inputs: RoundInputs, column: int, col: _Column) -> int:
    if not col.quorum or inputs.miners[column] in inputs.forfeited:
        return 0
    votes = [(inputs.reveals[v].scores[column], w) for v, w in zip(inputs.validators, col.weights, strict=True)
             if w and inputs.counted(v)]
    return weighted_median([s for s, _ in votes], [w for _, w in votes], col.total)


def _pay(pool: int, consensus: Sequence[int]) -> tuple[int, ...]:
    total = sum(consensus)
    return tuple(pool * c // total if total > 0 else 0 for c in consensus)


def _column_agreements(inputs: RoundInputs, column: int, col: _Column, consensus: int) -> list[int]:
    """a_ji of every validator j for one column (0 for a validator that does not decide it)."""
    out = []
    for validator, weight in zip(inputs.validators, col.weights, strict=True):
        reveal = inputs.reveals.get(validator)
        if reveal is None or validator in inputs.forfeited or not weight:
            out.append(0)
        else:
            out.append(agreement(reveal.scores[column], consensus) if col.quorum else ONE)
    return out


def _column_credits(inputs: RoundInputs, column: int, col: _Column, consensus: int) -> tuple[int, ...]:
    """credit_ji of every validator j for one column: the column's pool split by its weight in the
    column (stake, or committee seats) x agreement."""
    pool = inputs.validator_pool // inputs.n
    shares = [w * a for w, a in zip(col.weights, _column_agreements(inputs, column, col, consensus), strict=True)]
    total = sum(shares)
    return tuple(pool * share // total if total > 0 else 0 for share in shares)


def _cumulative(inputs: RoundInputs, accounts: Sequence[str], earned: Sequence[int]) -> tuple[int, ...]:
    def before(account: str) -> int:
        entry = inputs.prev.get(account)
        return 0 if entry is None else entry.cumulative
    return tuple(before(a) + e for a, e in zip(accounts, earned, strict=True))


def _reputation(inputs: RoundInputs, consensus: Sequence[int]) -> tuple[int, ...]:
    def before(account: str) -> int:
        entry = inputs.prev.get(account)
        return 0 if entry is None else entry.reputation
    return tuple((9 * before(m) + c) // 10 for m, c in zip(inputs.miners, consensus, strict=True))


def compute_result(inputs: RoundInputs) -> RoundResult:
    """Round `inputs.round`'s result, exactly as docs/PROTOCOL.md §11.2 defines it."""
    revealed_weight = sum(w for v, w in zip(inputs.validators, inputs.weights, strict=True) if v in inputs.reveals)
    quorum = has_quorum(revealed_weight, sum(inputs.weights))
    columns = [_column_of(inputs, quorum, i) for i in range(inputs.n)]
    consensus = tuple(_consensus_of(inputs, i, col) for i, col in enumerate(columns))
    pay = _pay(inputs.miner_pool, consensus)
    credits = tuple(_column_credits(inputs, i, col, c) for i, (col, c) in enumerate(zip(columns, consensus, strict=True)))
    validator_credit = tuple(sum(column[j] for column in credits) for j in range(len(inputs.validators)))
    return RoundResult(
        n=inputs.n,
        quorum=quorum,
        consensus=consensus,
        pay=pay,
        reputation=_reputation(inputs, consensus),
        cumulative=_cumulative(inputs, inputs.miners, pay),
        credits=credits,
        validator_credit=validator_credit,
        validator_cumulative=_cumulative(inputs, inputs.validators, validator_credit),
        minted=sum(pay) + sum(validator_credit),
        heldout_loss=lower_median([inputs.reveals[v].heldout_loss for v in inputs.validators if v in inputs.reveals]),
    )
