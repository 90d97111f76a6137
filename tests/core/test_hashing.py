from __future__ import annotations

import hashlib
import struct

import blake3
import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocol.core.crypto.hashing import (
    MerkleProof,
    MerkleProofError,
    StreamHasher,
    blake3_hash,
    leaf_hash,
    merkle_proof,
    merkle_root,
    merkle_root_from_proof,
    sha256_hash,
    verify_merkle_proof,
)


def _framing(domain: str, *parts: bytes) -> bytes:
    tag = b"veritrain/v1/" + domain.encode()
    out = struct.pack("<Q", len(tag)) + tag
    for p in parts:
        out += struct.pack("<Q", len(p)) + p
    return out


def test_golden_vectors() -> None:
    assert blake3_hash("test", b"abc").hex() == (
        "1c9c93abc77e87f42cdbe3b55669915d1b3598bf4751f771bc94761fcf348c4c")
    assert sha256_hash("test", b"abc").hex() == (
        "1e608e8ce119dca9434044edb0f30a822e91a5fa77b6edf74d080ef7eea29a63")
    assert blake3_hash("test").hex() == (
        "4ef6cab1689062a991e0319c6f47e23b194c071ac41ef84b622b428a0b0d6e9e")
    assert merkle_root([b"a", b"b", b"c"]).hex() == (
        "03bad07ddf7023006b4b2798a4982d34330bb9cbc2becc8724a19e98e0b9403f")
    assert merkle_root([bytes([i]) for i in range(8)]).hex() == (
        "0f416e97a0dfb1e64b7dd246a9adee6c0b2807ff5c843dd64622407bd61094eb")


def test_framing_matches_spec() -> None:
    assert blake3_hash("d", b"x", b"yz") == blake3.blake3(_framing("d", b"x", b"yz")).digest()
    assert sha256_hash("d", b"x") == hashlib.sha256(_framing("d", b"x")).digest()


def test_domain_and_boundaries_separate() -> None:
    assert blake3_hash("a", b"b") != blake3_hash("ab")
    assert blake3_hash("d", b"ab", b"c") != blake3_hash("d", b"a", b"bc")
    assert blake3_hash("d", b"abc") != blake3_hash("d", b"ab", b"c")


def test_stream_hasher_equals_one_shot() -> None:
    h = StreamHasher("d")
    h.update(b"x")
    h.update(memoryview(b"yz"))
    assert h.digest() == blake3_hash("d", b"x", b"yz")


def test_merkle_leaf_and_node_domains_differ() -> None:
    a, b = b"a", b"b"
    # a one-leaf tree over the concatenated node must not equal the two-leaf root
    assert merkle_root([a, b]) != merkle_root([leaf_hash(a) + leaf_hash(b)])
    assert merkle_root([a]) == leaf_hash(a)


@given(st.lists(st.binary(max_size=8), min_size=1, max_size=17), st.data())
def test_every_proof_verifies(leaves: list[bytes], data: st.DataObject) -> None:
    i = data.draw(st.integers(0, len(leaves) - 1))
    root = merkle_root(leaves)
    proof = merkle_proof(leaves, i)
    verify_merkle_proof(root, leaves[i], proof)
    assert merkle_root_from_proof(leaves[i], proof) == root


def test_tampered_proofs_fail() -> None:
    leaves = [bytes([i]) * 32 for i in range(7)]
    root = merkle_root(leaves)
    proof = merkle_proof(leaves, 5)
    with pytest.raises(MerkleProofError):
        verify_merkle_proof(root, leaves[4], proof)
    with pytest.raises(MerkleProofError):
        verify_merkle_proof(root, leaves[5], MerkleProof(4, 7, proof.siblings))
    with pytest.raises(MerkleProofError):
        verify_merkle_proof(root, leaves[5], MerkleProof(5, 7, proof.siblings[:-1]))
    with pytest.raises(MerkleProofError):
        verify_merkle_proof(root, leaves[5], MerkleProof(5, 7, (*proof.siblings, root)))
    with pytest.raises(MerkleProofError):
        merkle_root([])
    with pytest.raises(MerkleProofError):
        merkle_proof(leaves, 7)
