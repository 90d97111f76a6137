"""Finding where a posted result tree differs from this validator's own, one demanded leaf at a time.

A validator whose own result root differs from the pending one, with every header word that
chain data settles right, knows the difference may lie inside the posted tree, which it has
never seen. It demands leaves (docs/PROTOCOL.md §11.9, Demands): each answer is a posted leaf
with its whole path, so comparing it with its own tree shows the leaf itself wrong, or a node on
its path wrong (its children agree but its sums do not: a node challenge proves it), or a
sibling subtree that should be empty and is not, or the other way round (a shape challenge), or
names the smallest subtree whose hash differs, whose first leaf is the next demand.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from protocol.chain.challenge_args import leaf_answer_args
from protocol.core.settlement.abi_words import ZERO_WORD, list_hash
from protocol.core.settlement.result_header import SettledRound
from validator.posted_parts import PostedLeaf


class Step(enum.Enum):
    WRONG_LEAF = "wrong leaf"  # the leaf differs from this validator's
    DEMAND = "demand"  # the leaf agrees; a sibling subtree differs: demand its first leaf
    WRONG_NODE = "wrong node"  # the parent at `level` + 1 has children that agree and sums that do not
    WRONG_SHAPE = "wrong shape"  # the sibling at `level` is empty in one tree and not in the other
    SAME = "same"  # the whole path agrees: nothing found under this leaf


@dataclass(frozen=True)
class Finding:
    step: Step
    column: int  # the leaf examined, or for DEMAND the column to demand next
    level: int = 0  # for WRONG_NODE and WRONG_SHAPE: the level of the children / the sibling


def own_leaf(own: SettledRound, i: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Column i's fields and sums in this validator's tree."""
    leaf, sums = leaf_answer_args(own, i)[:2]
    return tuple(leaf), tuple(sums)


def next_step(own: SettledRound, leaf: PostedLeaf) -> Finding:
    """What a posted leaf shows about the posted tree."""
    i = leaf.position
    if (leaf.fields, leaf.sums) != own_leaf(own, i):
        return Finding(Step.WRONG_LEAF, i)
    levels = own.tree.levels
    for k, (sibling, parent_sums) in enumerate(zip(leaf.siblings, leaf.sums_hashes, strict=True)):
        mine = levels[k][(i >> k) ^ 1].hash
        if sibling != mine:
            first = ((i >> k) ^ 1) << k
            if first >= own.inputs.n or sibling == ZERO_WORD:
                return Finding(Step.WRONG_SHAPE, i, k)  # a column beyond n, or a missing one
            return Finding(Step.DEMAND, first)
        if parent_sums != list_hash(levels[k + 1][i >> (k + 1)].sums):
            return Finding(Step.WRONG_NODE, i, k)
    return Finding(Step.SAME, i)
