"""Who serves each node of the aggregation tree (PROTOCOL.md §13.9): two validators per node, drawn
by stake with the round's seed, each within a budget of its stake's share of the tree's work.

A node's **load** is what its inputs can hold, in coordinates per top-k chunk: an update holds
`topk`, a partial sum over k leaves at most min(k · topk, chunk), so the load grows with the leaves
below a node until its inputs are dense and stays there. A validator of weight w may serve nodes of
total load up to ⌈2 · L · w / W⌉ + the load of the largest bottom node (L the tree's total load, W
the weights' sum): drawing by stake alone, one validator among hundreds is drawn for several of the
few dense nodes near the root, and the busiest validator's bytes grew with the network (1.63× from
100 to 10,000 miners); with budgets, none serves much more than its share while no validator
holds much more than a quarter of the stake. (A slack of the largest node's load let one of three
validators serve every node of a small tree.) One holding half or more can serve each node only
once, under its share; the others then overflow theirs, the least loaded first.

Nodes are drawn root first (the heaviest first, so the small nodes at the bottom fill what is left),
each by draws keccak256(DOMAIN ‖ seed ‖ L ‖ i ‖ draw) mod W over the stake line (as committee
seats are, `committees.py`), draw = 0, 1, … : the aggregator is the first holder with room, the
checker the first after it that has room and is not the aggregator. After MAX_DRAWS draws without
room (a validator holding nearly all the stake), the validator with the least overflow takes it.
Neither a miner nor a validator can choose where the draws fall: the seed exists only after the
commits and the validator snapshot are fixed.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from protocol.core.aggregation.tree import TreeNode, level_sizes, tree_nodes
from protocol.core.crypto.keccak import keccak256
from protocol.core.errors import ConfigError

DOMAIN = b"veritrain/aggregator/v1"
MAX_DRAWS = 64  # draws for one server before the least-loaded validator takes it

Key = tuple[int, int]


@dataclass(frozen=True)
class InputSize:
    """The density of a node's inputs, in coordinates per top-k chunk (`ComputeConfig`)."""

    topk: int  # an update's
    chunk: int  # a dense partial sum's


def node_loads(leaves: int, fan_in: int, size: InputSize) -> dict[Key, int]:
    """Every inner node's load, in tree order (bottom level first)."""
    under = [[1] * leaves]
    for count in level_sizes(leaves, fan_in)[1:]:
        under.append([sum(under[-1][i * fan_in : (i + 1) * fan_in]) for i in range(count)])
    return {(n.level, n.index): sum(min(under[n.level - 1][c] * size.topk, size.chunk) for c in n.children)
            for n in tree_nodes(leaves, fan_in)}


@dataclass
class _Budgets:
    cumulative: list[int]  # the stake line
    room: list[int]  # load each validator may still take

    def holder(self, seed: bytes, node: TreeNode, draw: int) -> int:
        digest = keccak256(DOMAIN + seed + node.level.to_bytes(32, "big") + node.index.to_bytes(32, "big")
                           + draw.to_bytes(32, "big"))
        return bisect.bisect_right(self.cumulative, int.from_bytes(digest, "big") % self.cumulative[-1])

    def pick(self, seed: bytes, node: TreeNode, first_draw: int, load: int, besides: int,
             weights: Sequence[int]) -> tuple[int, int]:
        """The first holder from `first_draw` on with room for `load` that is not `besides`, and the
        next draw; the least overflowing validator after MAX_DRAWS."""
        for draw in range(first_draw, first_draw + MAX_DRAWS):
            if (v := self.holder(seed, node, draw)) != besides and self.room[v] >= load:
                break
        else:
            v = max((u for u, w in enumerate(weights) if w > 0 and u != besides), key=lambda u: (self.room[u], -u))
        self.room[v] -= load
        return v, draw + 1


def servers(seed: bytes, leaves: int, fan_in: int, weights: Sequence[int], size: InputSize) -> dict[Key, tuple[int, int]]:
    """(aggregator, checker) of every inner node, validator indices into `weights`, in tree order."""
    if sum(1 for w in weights if w > 0) < 2:
        raise ConfigError("a node's checker must differ from its aggregator: need two validators with weight")
    loads = node_loads(leaves, fan_in, size)
    total, stake = sum(loads.values()), sum(weights)
    slack = max(load for (level, _), load in loads.items() if level == 1)  # one bottom node
    budgets = _Budgets(list(itertools.accumulate(weights)),
                       [-(-2 * total * w // stake) + slack if w > 0 else 0 for w in weights])
    drawn: dict[Key, tuple[int, int]] = {}
    for node in reversed(tree_nodes(leaves, fan_in)):
        key = (node.level, node.index)
        first, draw = budgets.pick(seed, node, 0, loads[key], -1, weights)
        second, _ = budgets.pick(seed, node, draw, loads[key], first, weights)
        drawn[key] = (first, second)
    return {key: drawn[key] for key in loads}
