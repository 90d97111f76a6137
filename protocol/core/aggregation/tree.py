"""The aggregation tree (PROTOCOL.md §13.9): its shape, and who computes and rechecks each node.

The selected updates, in address order, are the leaves (level 0). Level L + 1 has one node per
`fan_in` consecutive nodes of level L (the last may have fewer), up to a single root; with
`fan_in` >= the leaf count the root sums every leaf, today's flat shape. exact-sum-v1's integer
sums make every node's partial sum the same bits whoever computes it, so any node is evidence.

Node (L, i) is computed by its **aggregator** and recomputed by its **checker**, two validators
drawn by stake within budgets (`tree_servers.py`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from protocol.core.aggregation.exact_sum_v1 import PartialSum, merge
from protocol.core.crypto.keccak import keccak256
from protocol.core.errors import ConfigError
from protocol.core.settlement.claims_tree import claims_root

NODE_DOMAIN = b"veritrain/tree-node/v1"
NO_TREE = bytes(32)  # the header's aggregation root of a round summed flat


@dataclass(frozen=True)
class TreeNode:
    level: int  # 1 .. depth; level 0 are the leaves
    index: int  # position within its level, left to right
    children: range  # indices into level - 1


def level_sizes(leaves: int, fan_in: int) -> list[int]:
    """Nodes per level, leaves first, the root's level (1 node) last."""
    if fan_in < 2:
        raise ConfigError(f"an aggregation tree needs a fan-in of at least 2, not {fan_in}")
    if leaves < 1:
        raise ConfigError("an aggregation tree needs at least one leaf")
    sizes = [leaves]
    while sizes[-1] > 1 or len(sizes) == 1:
        sizes.append(-(-sizes[-1] // fan_in))
    return sizes


def tree_nodes(leaves: int, fan_in: int) -> list[TreeNode]:
    """Every inner node, bottom level first, left to right: children before parents."""
    sizes = level_sizes(leaves, fan_in)
    return [TreeNode(level, i, range(i * fan_in, min((i + 1) * fan_in, sizes[level - 1])))
            for level in range(1, len(sizes)) for i in range(sizes[level])]


def depth(leaves: int, fan_in: int) -> int:
    """Levels of inner nodes: 1 when one root sums every leaf."""
    return len(level_sizes(leaves, fan_in)) - 1


def node_sums(leaves: Sequence[PartialSum], fan_in: int) -> dict[tuple[int, int], PartialSum]:
    """Every inner node's partial sum, keyed (level, index), computed bottom-up; the root is
    at (depth, 0)."""
    out: dict[tuple[int, int], PartialSum] = {}
    below = list(leaves)
    for level, size in enumerate(level_sizes(len(leaves), fan_in)[1:], start=1):
        below = [merge(below[i * fan_in : (i + 1) * fan_in]) for i in range(size)]
        out.update({(level, i): part for i, part in enumerate(below)})
    return out


def node_leaf(level: int, index: int, partial_hash: bytes) -> bytes:
    """A node's leaf in the aggregation root: keccak256(NODE_DOMAIN ‖ level ‖ index ‖ hash)."""
    return keccak256(NODE_DOMAIN + level.to_bytes(32, "big") + index.to_bytes(32, "big") + partial_hash)


def aggregation_root(node_hashes: dict[tuple[int, int], bytes]) -> bytes:
    """The result header's commitment to every node's partial-sum hash: a sorted-pair keccak Merkle
    root (the claims tree's, OpenZeppelin's `MerkleProof`) over `node_leaf` of each node, so one
    node's certified hash can be proven with log N siblings."""
    if not node_hashes:
        return NO_TREE
    return claims_root([node_leaf(level, index, h) for (level, index), h in node_hashes.items()])
