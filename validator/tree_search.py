"""Finding where a posted result tree differs from this validator's own, one demanded leaf at a time.

A validator whose own result root differs from the pending one, with every header word that
chain data settles right, knows the difference lies inside the posted tree, which it has never
seen. It demands leaves (docs/PROTOCOL.md §11.9, Demands): each answer is a posted leaf with its
whole path, so comparing it with its own tree either shows the leaf itself wrong (a column
challenge proves it) or names the smallest subtree whose hash differs, whose first leaf is the
next demand. A path that agrees at every sibling but not at a parent's sums shows an internal
node wrong (no demand reaches its children: logged).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from protocol.chain.challenge_args import column_args
from protocol.core.settlement.abi_words import list_hash
from protocol.core.settlement.result_header import SettledRound


@dataclass(frozen=True)
class PostedLeaf:
    """A `LeafAnswered` event: column `position` of the posted tree, its sums and its path."""

    position: int
    fields: tuple[int, ...]
    sums: tuple[int, ...]
    siblings: tuple[bytes, ...]
    sums_hashes: tuple[bytes, ...]

    @classmethod
    def of_event(cls, row: dict) -> PostedLeaf:
        return cls(int(row["position"]), tuple(int(x) for x in row["fields"]), tuple(int(x) for x in row["sums"]),
                   tuple(bytes(s) for s in row["siblings"]), tuple(bytes(h) for h in row["sums_hashes"]))

    def args(self) -> tuple:
        """(leaf, sums, path) as `challenge_column` takes them."""
        return (self.fields, list(self.sums), (list(self.siblings), list(self.sums_hashes)))


class Step(enum.Enum):
    WRONG_LEAF = "wrong leaf"  # the leaf differs from this validator's: challenge its column
    DEMAND = "demand"  # the leaf agrees; a sibling subtree differs: demand its first leaf
    WRONG_NODE = "wrong node"  # an internal node's sums differ where its children agree
    SAME = "same"  # the whole path agrees: nothing found under this leaf


def own_leaf(own: SettledRound, i: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Column i's fields and sums in this validator's tree."""
    leaf, sums = column_args(own, i)[:2]
    return tuple(leaf), tuple(sums)


def next_step(own: SettledRound, leaf: PostedLeaf) -> tuple[Step, int]:
    """What a posted leaf shows, and the column it concerns (for DEMAND: the next to demand)."""
    i = leaf.position
    if (leaf.fields, leaf.sums) != own_leaf(own, i):
        return Step.WRONG_LEAF, i
    levels = own.tree.levels
    for k, (sibling, parent_sums) in enumerate(zip(leaf.siblings, leaf.sums_hashes, strict=True)):
        if sibling != levels[k][(i >> k) ^ 1].hash:
            first = ((i >> k) ^ 1) << k
            return (Step.DEMAND, first) if first < own.inputs.n else (Step.WRONG_NODE, i)
        if parent_sums != list_hash(levels[k + 1][i >> (k + 1)].sums):
            return Step.WRONG_NODE, i
    return Step.SAME, i
