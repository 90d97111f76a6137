"""The validator entries and their tree (docs/PROTOCOL.md §11.5), checked against eth_abi and a
recursive reference."""

from __future__ import annotations

import pytest
from eth_abi import encode
from hypothesis import given, settings
from hypothesis import strategies as st
from result_strategies import ACCOUNTS, round_inputs

from protocol.core.crypto.keccak import keccak256
from protocol.core.errors import ResultError
from protocol.core.settlement.entries_tree import (
    entry_hash,
    entry_path,
    validator_entries,
    validators_hash,
    verify_entry,
)
from protocol.core.settlement.result import compute_result
from protocol.core.settlement.result_inputs import PrevEntry, RoundInputs

ZERO = bytes(32)


def reference_root(leaves: list[bytes]) -> bytes:
    """The spec's tree, recursively: the smallest power of two of leaves, zero-padded."""
    width = 1
    while width < len(leaves):
        width *= 2

    def node(lo: int, size: int) -> bytes:
        if size == 1:
            return leaves[lo] if lo < len(leaves) else ZERO
        return keccak256(node(lo, size // 2) + node(lo + size // 2, size // 2))

    return node(0, width)


@settings(max_examples=100, deadline=None)
@given(round_inputs())
def test_validator_entries_match_eth_abi(inp: RoundInputs) -> None:
    res = compute_result(inp)
    expected = []
    for j, v in enumerate(inp.validators):
        e = inp.prev.get(v)
        prev, prev_index = (e.round + 1, e.index) if e else (0, 0)
        expected.append(keccak256(encode(
            ["bytes32", "uint256", "address", "uint256", "uint256", "uint256", "uint256"],
            [keccak256(b"veritrain/validator/v1"), j, v, res.validator_credit[j], res.validator_cumulative[j],
             prev, prev_index])))
    entries = validator_entries(inp, res)
    assert list(entries) == expected
    assert validators_hash(entries) == (reference_root(expected) if expected else ZERO)


def test_entry_hash_binds_the_prev_pointer() -> None:
    v = ACCOUNTS[0]
    inp = RoundInputs(9, (), (v,), (1,), {}, frozenset(), {v: PrevEntry(4, 2, 0, 5)}, 0, 0)
    assert validator_entries(inp, compute_result(inp)) == (entry_hash(0, v, 0, 5, 5, 2),)
    assert entry_hash(0, v, 0, 5, 5, 2) == entry_hash(0, int(v, 16), 0, 5, 5, 2)  # a challenge's word


@settings(max_examples=60, deadline=None)
@given(st.lists(st.binary(min_size=32, max_size=32), min_size=1, max_size=40), st.data())
def test_every_entry_proves_at_its_position_and_nowhere_else(leaves: list[bytes], data) -> None:
    root, v = validators_hash(leaves), len(leaves)
    assert root == reference_root(leaves)
    j = data.draw(st.integers(0, v - 1))
    path = entry_path(leaves, j)
    assert verify_entry(leaves[j], j, path, v, root)
    other = data.draw(st.integers(0, v - 1))
    if leaves[other] != leaves[j]:
        assert not verify_entry(leaves[other], j, path, v, root)  # another leaf at j
    if other != j and (other ^ j) >> len(path) == 0:
        assert not verify_entry(leaves[j], other, path, v, root) or leaves[j] == leaves[other]
    assert not verify_entry(leaves[j], v + j, path, v, root)  # a position past the round's validators
    assert not verify_entry(leaves[j], j, path[:-1], v, root) or not path  # a short path


def test_no_entry_has_no_path() -> None:
    with pytest.raises(ResultError, match="no validator entry 3 among 3"):
        entry_path([ZERO] * 3, 3)
    assert validators_hash([]) == ZERO
