"""Cumulative claims (docs/PROTOCOL.md §11.6) against OpenZeppelin's MerkleProof semantics."""

from __future__ import annotations

import pytest
from eth_abi import encode
from hypothesis import given, settings
from hypothesis import strategies as st
from result_strategies import ACCOUNTS

from protocol.core.crypto.keccak import keccak256
from protocol.core.errors import ResultError
from protocol.core.settlement.claims_tree import (
    CLAIMS_CHUNK,
    chunk_count,
    chunk_summaries,
    claim_chunks,
    claim_leaf,
    claim_proof,
    claims_list_hash,
    claims_root,
    verify_claim,
)

claims_st = st.lists(st.tuples(st.sampled_from(ACCOUNTS), st.integers(0, 2**256 - 1)), max_size=40)


def oz_hash_pair(a: bytes, b: bytes) -> bytes:
    return keccak256(a + b) if int.from_bytes(a, "big") < int.from_bytes(b, "big") else keccak256(b + a)


def oz_process_proof(proof: list[bytes], leaf: bytes) -> bytes:
    """MerkleProof.processProof, line for line."""
    computed = leaf
    for element in proof:
        computed = oz_hash_pair(computed, element)
    return computed


def recursive_root(leaves: list[bytes]) -> bytes:
    """The spec's level-by-level tree, written as recursion over the largest power-of-two split."""
    if not leaves:
        return bytes(32)
    if len(leaves) == 1:
        return leaves[0]
    pairs = [oz_hash_pair(leaves[k], leaves[k + 1]) for k in range(0, len(leaves) - 1, 2)]
    return recursive_root(pairs + leaves[len(pairs) * 2:])


@settings(max_examples=300, deadline=None)
@given(claims_st)
def test_every_proof_verifies_and_matches_openzeppelin(claims: list[tuple[str, int]]) -> None:
    leaves = [claim_leaf(a, amt) for a, amt in claims]
    root = claims_root(leaves)
    assert root == recursive_root(leaves)
    one_chunk = [keccak256(encode(["bytes32[]"], [leaves])), root] if leaves else []
    assert claims_list_hash(leaves) == keccak256(encode(["bytes32[]"], [one_chunk]))
    for k, leaf in enumerate(leaves):
        proof = claim_proof(leaves, k)
        assert verify_claim(proof, root, leaf)
        assert oz_process_proof(proof, leaf) == root
        assert len(proof) <= max(len(leaves) - 1, 0).bit_length()


@settings(max_examples=200, deadline=None)
@given(claims_st.filter(lambda c: len(c) > 0), st.data())
def test_a_proof_for_another_account_or_amount_fails(claims: list[tuple[str, int]], data: st.DataObject) -> None:
    leaves = [claim_leaf(a, amt) for a, amt in claims]
    root = claims_root(leaves)
    k = data.draw(st.integers(0, len(leaves) - 1))
    account, amount = claims[k]
    proof = claim_proof(leaves, k)
    other = data.draw(st.sampled_from([x for x in ACCOUNTS if x != account]))
    assert not verify_claim(proof, root, claim_leaf(account, (amount + 1) % 2**256))
    if claim_leaf(other, amount) not in leaves:
        assert not verify_claim(proof, root, claim_leaf(other, amount))


def test_claim_leaf_is_the_double_hash_of_the_pair() -> None:
    a = ACCOUNTS[0]
    assert claim_leaf(a, 5) == keccak256(keccak256(encode(["address", "uint256"], [a, 5])))


def test_small_trees() -> None:
    leaves = [claim_leaf(ACCOUNTS[k], k) for k in range(3)]
    assert claims_root([]) == bytes(32)
    assert claims_root(leaves[:1]) == leaves[0] and claim_proof(leaves[:1], 0) == []
    assert claims_root(leaves) == oz_hash_pair(oz_hash_pair(leaves[0], leaves[1]), leaves[2])
    assert claim_proof(leaves, 2) == [oz_hash_pair(leaves[0], leaves[1])]  # promoted, then paired
    with pytest.raises(ResultError):
        claim_proof(leaves, 3)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 4 * CLAIMS_CHUNK + 3), st.binary(min_size=1, max_size=8))
def test_the_claims_root_is_the_tree_of_its_chunk_roots(size: int, salt: bytes) -> None:
    """A chunk starts at a multiple of a power of two, so its tree is a node of the whole tree:
    the root of the chunk roots is the root of the leaves, whatever the last chunk's length."""
    leaves = [keccak256(salt + k.to_bytes(4, "big")) for k in range(size)]
    chunks = claim_chunks(leaves)
    assert len(chunks) == chunk_count(size) and [x for c in chunks for x in c] == leaves
    assert all(len(c) == CLAIMS_CHUNK for c in chunks[:-1])
    roots = chunk_summaries(leaves)[1::2]
    assert claims_root(roots) == claims_root(leaves) == recursive_root(leaves)
