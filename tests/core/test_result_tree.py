"""The column sum tree (docs/PROTOCOL.md §11.4), checked against eth_abi."""

from __future__ import annotations

import pytest
from eth_abi import encode
from hypothesis import given, settings
from result_strategies import ACCOUNTS, round_inputs

from protocol.core.crypto.keccak import keccak256
from protocol.core.errors import ResultError
from protocol.core.settlement.result import compute_result
from protocol.core.settlement.result_inputs import Reveal, RoundInputs
from protocol.core.settlement.result_tree import (
    ColumnTree,
    node_hash,
    tree_depth,
    verify_path,
)

ZERO = bytes(32)


def abi_node(body: bytes, sums: list[int]) -> bytes:
    return keccak256(encode(["bytes32", "bytes32"], [body, keccak256(encode(["uint256[]"], [sums]))]))


def reference_root(inp: RoundInputs) -> tuple[bytes, list[int]]:
    """The spec's tree, recursively, from eth_abi encodings."""
    res = compute_result(inp)
    width = 2 + len(inp.validators)

    def leaf(i: int) -> tuple[bytes, list[int]]:
        if i >= inp.n:
            return ZERO, [0] * width
        e = inp.prev.get(inp.miners[i])
        prev, prev_index = (e.round + 1, e.index) if e else (0, 0)
        body = keccak256(encode(["bytes32", "uint256", "address", "uint256", "uint256", "uint256", "uint256"], [
            keccak256(b"veritrain/column/v1"), i, inp.miners[i], res.reputation[i], res.cumulative[i], prev, prev_index]))
        sums = [res.consensus[i], res.pay[i], *res.credits[i]]
        return abi_node(body, sums), sums

    def node(level: int, index: int) -> tuple[bytes, list[int]]:
        if level == 0:
            return leaf(index)
        (lh, ls), (rh, rs) = node(level - 1, 2 * index), node(level - 1, 2 * index + 1)
        sums = [a + b for a, b in zip(ls, rs, strict=True)]
        if lh == ZERO and rh == ZERO:
            return ZERO, sums
        return abi_node(keccak256(lh + rh), sums), sums

    depth = 0 if inp.n <= 1 else (inp.n - 1).bit_length()
    return node(depth, 0)


def build(inp: RoundInputs) -> ColumnTree:
    return ColumnTree.build(inp, compute_result(inp))


@settings(max_examples=300, deadline=None)
@given(round_inputs(max_miners=9))
def test_tree_matches_the_reference_and_its_root_sums_are_the_totals(inp: RoundInputs) -> None:
    tree, res = build(inp), compute_result(inp)
    root, sums = reference_root(inp)
    assert tree.tree_root() == root
    body, root_sums = tree.root_preimage()
    assert list(root_sums) == sums
    assert root_sums == (sum(res.consensus), sum(res.pay), *res.validator_credit)
    if inp.n:
        assert node_hash(body, root_sums) == root


@settings(max_examples=300, deadline=None)
@given(round_inputs(max_miners=9))
def test_every_node_path_verifies_and_node_sums_add_up(inp: RoundInputs) -> None:
    tree = build(inp)
    root, d = tree.tree_root(), tree.depth
    assert d == tree_depth(inp.n)
    for level in range(d + 1):
        for index, node in enumerate(tree.levels[level]):
            if node.empty:
                continue
            assert verify_path(node.hash, level, index, tree.inclusion_path(level, index), d, root)
            assert node_hash(*tree.node_preimage(level, index)) == node.hash
            if level:
                (lb, ls), (rb, rs) = tree.children_preimages(level, index)
                assert tuple(a + b for a, b in zip(ls, rs, strict=True)) == node.sums


@settings(max_examples=100, deadline=None)
@given(round_inputs(max_miners=9))
def test_a_changed_sum_field_or_step_breaks_the_path(inp: RoundInputs) -> None:
    tree = build(inp)
    root, d = tree.tree_root(), tree.depth
    for i in range(inp.n):
        path = tree.inclusion_path(0, i)
        body, sums = tree.node_preimage(0, i)
        bumped = (sums[0] + 1, *sums[1:])
        assert not verify_path(node_hash(body, bumped), 0, i, path, d, root)
        assert not verify_path(node_hash(keccak256(body), sums), 0, i, path, d, root)
        for k, (sibling, sums_hash) in enumerate(path):
            for step in ((keccak256(sibling), sums_hash), (sibling, keccak256(sums_hash))):
                assert not verify_path(tree.levels[0][i].hash, 0, i, path[:k] + [step] + path[k + 1:], d, root)
        if d:
            assert not verify_path(tree.levels[0][i].hash, 0, i ^ 1, path, d, root)  # wrong position
            assert not verify_path(tree.levels[0][i].hash, 0, i, path[:-1], d, root)  # short path


def inputs_with(n: int, v: int = 2) -> RoundInputs:
    miners, validators = tuple(ACCOUNTS[:n]), tuple(ACCOUNTS[n:n + v])
    reveals = {x: Reveal(tuple(range(1, n + 1)), 7, bytes(32)) for x in validators}
    return RoundInputs(3, miners, validators, (1,) * v, reveals, frozenset(), {}, 10**18, 6000)


@pytest.mark.parametrize("n, depth", [(0, 0), (1, 0), (2, 1), (3, 2), (5, 3)])
def test_depth_and_empty_padding(n: int, depth: int) -> None:
    tree = build(inputs_with(n))
    assert tree.depth == depth and len(tree.levels[0]) == 2**depth
    for node in tree.levels[0][n:]:
        assert node.hash == ZERO and node.body == ZERO and node.sums == (0,) * 4
    for index, node in enumerate(tree.levels[0][:n]):
        assert not node.empty and verify_path(node.hash, 0, index, tree.inclusion_path(0, index), depth, tree.tree_root())
    if n == 0:
        assert tree.tree_root() == ZERO and tree.root_preimage() == (ZERO, (0,) * 4)
    if n == 1:
        assert tree.tree_root() == tree.levels[0][0].hash and tree.inclusion_path(0, 0) == []
    if n == 5:  # the right half above positions 6, 7 is empty; position 4's parent is not
        assert tree.levels[1][3].empty and not tree.levels[1][2].empty


def test_out_of_range_nodes_raise() -> None:
    tree = build(inputs_with(3))
    for call in (lambda: tree.node_preimage(3, 0), lambda: tree.inclusion_path(0, 4),
                 lambda: tree.children_preimages(0, 0), lambda: tree.node_preimage(-1, 0)):
        with pytest.raises(ResultError):
            call()


