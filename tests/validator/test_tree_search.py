"""Locating a wrong value inside a posted tree from demanded leaves (validator/tree_search.py).

The posted tree is the honest one with one column's consensus raised (so its pay and every sum
above it change): demanding leaf 0 and following the differing sibling subtree reaches the wrong
column in at most depth demands, and the wrong leaf is recognized; the honest tree shows nothing.
"""

from __future__ import annotations

import dataclasses

import pytest

from protocol.core.crypto.keccak import checksum_address, keccak256
from protocol.core.settlement.result import RoundResult, compute_result
from protocol.core.settlement.result_header import SettledRound, build_result
from protocol.core.settlement.result_inputs import Reveal, RoundInputs
from protocol.core.settlement.result_tree import ColumnTree
from validator.posted_parts import PostedLeaf
from validator.tree_search import Step, next_step

A = [checksum_address(keccak256(b"search account %d" % k)[:20]) for k in range(24)]
T = 10**18
N = 11  # columns: a tree of depth 4 with empty positions


def honest() -> SettledRound:
    validators = (A[20], A[21], A[22])
    inputs = RoundInputs(
        round=1, miners=tuple(A[:N]), validators=validators, weights=(3 * T, 2 * T, T),
        reveals={v: Reveal(tuple(1000 * (i + 1) + k for i in range(N)), 500_000, keccak256(v.encode()))
                 for k, v in enumerate(validators)},
        forfeited=frozenset(), prev={}, emission=1000 * T, miner_share_bps=7000)
    return build_result(inputs, 1, A[23], keccak256(b"run"), keccak256(b"model"))


def posted_tree(own: SettledRound, wrong: int | None) -> tuple[ColumnTree, RoundResult]:
    """The tree of `own`'s result, with column `wrong`'s consensus raised by one, and its result."""
    result = compute_result(own.inputs)
    if wrong is not None:
        consensus = list(result.consensus)
        consensus[wrong] += 1
        result = dataclasses.replace(result, consensus=tuple(consensus))
    return ColumnTree.build(own.inputs, result), result


def answer(own: SettledRound, posted: tuple[ColumnTree, RoundResult], i: int) -> PostedLeaf:
    """What `answer_leaf` logs for column i of the posted tree."""
    tree, result = posted
    miner = own.inputs.miners[i]
    prev, prev_index = own.inputs.prev_pointer(miner)
    path = tree.inclusion_path(0, i)
    return PostedLeaf(i, (i, int(miner, 16), result.reputation[i], result.cumulative[i], prev, prev_index),
                      tuple(tree.levels[0][i].sums), tuple(s for s, _ in path), tuple(h for _, h in path))


@pytest.mark.parametrize("wrong", range(N))
def test_following_differing_subtrees_reaches_the_wrong_column(wrong):
    own = honest()
    tree = posted_tree(own, wrong)
    position, demands = 0, 1
    while True:
        found = next_step(own, answer(own, tree, position))
        if found.step is not Step.DEMAND:
            break
        position, demands = found.column, demands + 1
    assert (found.step, found.column) == (Step.WRONG_LEAF, wrong)
    assert demands <= own.tree.depth + 1


def test_the_honest_tree_shows_nothing():
    own = honest()
    tree = posted_tree(own, None)
    assert all(next_step(own, answer(own, tree, i)).step is Step.SAME for i in range(N))
