"""The column sum tree of a round's result (docs/PROTOCOL.md §11.4).

Each node carries the elementwise sums of its leaves' [consensus, pay, credit_0..credit_{V-1}],
so a challenger can dispute one node (its sums are not its children's) or one leaf (its values
are not what the chain data give) and the contract checks just that, never the whole round.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from protocol.core.crypto.keccak import keccak256
from protocol.core.errors import ResultError
from protocol.core.settlement.abi_words import ZERO_WORD, enc, list_hash, tag
from protocol.core.settlement.result import RoundResult
from protocol.core.settlement.result_inputs import RoundInputs

COLUMN_DOMAIN = tag("veritrain/column/v1")

Preimage = tuple[bytes, tuple[int, ...]]  # (body, sums): node_hash(body, sums) is the node's hash
PathStep = tuple[bytes, bytes]  # (sibling_hash, parent_sums_hash)


def fields_hash(index: int, miner: str, reputation: int, cumulative: int, prev: int, prev_index: int) -> bytes:
    """The non-summed values of column `index`."""
    return keccak256(enc(COLUMN_DOMAIN, index, miner, reputation, cumulative, prev, prev_index))


def node_hash(body: bytes, sums: Sequence[int]) -> bytes:
    """A node: its body (fields hash for a leaf, children hash otherwise) bound to its sums."""
    return keccak256(enc(body, list_hash(sums)))


def children_hash(left: bytes, right: bytes) -> bytes:
    """The body of an inner node."""
    return keccak256(enc(left, right))


def tree_depth(n: int) -> int:
    """d = ceil(log2 n), 0 for n <= 1."""
    return 0 if n <= 1 else (n - 1).bit_length()


@dataclass(frozen=True)
class Node:
    hash: bytes  # ZERO_WORD for an empty position
    body: bytes  # ZERO_WORD for an empty position
    sums: tuple[int, ...]

    @property
    def empty(self) -> bool:
        return self.hash == ZERO_WORD


def empty_node(width: int) -> Node:
    return Node(ZERO_WORD, ZERO_WORD, (0,) * width)


def parent(left: Node, right: Node) -> Node:
    """Two empty children give an empty parent; otherwise hash the children and add their sums."""
    if left.empty and right.empty:
        return empty_node(len(left.sums))
    body = children_hash(left.hash, right.hash)
    sums = tuple(a + b for a, b in zip(left.sums, right.sums, strict=True))
    return Node(node_hash(body, sums), body, sums)


def leaf_nodes(inputs: RoundInputs, result: RoundResult) -> list[Node]:
    """One leaf per column: its fields hash and sums [c_i, pay_i, credit_i0, ..., credit_i(V-1)]."""
    leaves = []
    for i, miner in enumerate(inputs.miners):
        prev, prev_index = inputs.prev_pointer(miner)
        body = fields_hash(i, miner, result.reputation[i], result.cumulative[i], prev, prev_index)
        sums = (result.consensus[i], result.pay[i], *result.credits[i])
        leaves.append(Node(node_hash(body, sums), body, sums))
    return leaves


@dataclass(frozen=True)
class ColumnTree:
    """All levels of the tree, level 0 = the 2^d leaf positions, the last level = the root."""

    levels: tuple[tuple[Node, ...], ...]

    @classmethod
    def build(cls, inputs: RoundInputs, result: RoundResult) -> ColumnTree:
        width = 2 + len(inputs.validators)
        depth = tree_depth(inputs.n)
        level = leaf_nodes(inputs, result) + [empty_node(width)] * (2**depth - inputs.n)
        levels = [tuple(level)]
        while len(level) > 1:
            level = [parent(level[k], level[k + 1]) for k in range(0, len(level), 2)]
            levels.append(tuple(level))
        return cls(tuple(levels))

    @property
    def depth(self) -> int:
        return len(self.levels) - 1

    @property
    def root(self) -> Node:
        return self.levels[-1][0]

    def tree_root(self) -> bytes:
        return self.root.hash

    def root_preimage(self) -> Preimage:
        """(root_body, root_sums): proves the totals, node_hash(body, sums) == tree_root."""
        return self.node_preimage(self.depth, 0)

    def node(self, level: int, index: int) -> Node:
        if not 0 <= level <= self.depth or not 0 <= index < len(self.levels[level]):
            raise ResultError(f"no node at level {level}, index {index} in a tree of depth {self.depth}")
        return self.levels[level][index]

    def node_preimage(self, level: int, index: int) -> Preimage:
        node = self.node(level, index)
        return node.body, node.sums

    def children_preimages(self, level: int, index: int) -> tuple[Preimage, Preimage]:
        """The preimages of the two children of an inner node (a node challenge's calldata)."""
        if level < 1:
            raise ResultError("a leaf has no children")
        self.node(level, index)
        return self.node_preimage(level - 1, 2 * index), self.node_preimage(level - 1, 2 * index + 1)

    def inclusion_path(self, level: int, index: int) -> list[PathStep]:
        """(sibling_hash, parent_sums_hash) from the node at (level, index) up to the root."""
        self.node(level, index)
        path = []
        for current in range(level, self.depth):
            sibling = self.levels[current][index ^ 1]
            above = self.levels[current + 1][index >> 1]
            path.append((sibling.hash, list_hash(above.sums)))
            index >>= 1
        return path


def verify_path(node: bytes, level: int, index: int, path: Sequence[PathStep], depth: int, root: bytes) -> bool:
    """What the contract checks: hashing up from `node` along `path` gives `root`.

    The bit of `index` at each level says whether the current node is the left (0) or right child.
    """
    if len(path) != depth - level or not 0 <= index < 2 ** max(depth - level, 0):
        return False
    current = node
    for sibling, parent_sums_hash in path:
        left, right = (current, sibling) if index & 1 == 0 else (sibling, current)
        current = keccak256(enc(children_hash(left, right), parent_sums_hash))
        index >>= 1
    return current == root
