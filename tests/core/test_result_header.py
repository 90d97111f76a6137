"""The result header, score vectors and ABI words (docs/PROTOCOL.md §11.1, §11.7), against eth_abi."""

from __future__ import annotations

import pytest
from eth_abi import encode
from hypothesis import given, settings
from hypothesis import strategies as st
from result_strategies import ACCOUNTS, round_inputs

from protocol.core.crypto.keccak import keccak256
from protocol.core.errors import ResultError
from protocol.core.settlement.abi_words import enc, list_hash, tag, word
from protocol.core.settlement.claims_tree import verify_claim
from protocol.core.settlement.result_header import build_result
from protocol.core.settlement.result_inputs import Reveal, RoundInputs
from protocol.core.settlement.result_tree import verify_path
from protocol.core.settlement.score_vector import (
    pack_scores,
    score_commitment,
    unpack_scores,
    vector_root,
)

CHAIN, RESULTS, SCORES = 31337, ACCOUNTS[70], ACCOUNTS[71]
CONFIG, MODEL = keccak256(b"config"), keccak256(b"model")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 2**256 - 1), max_size=5), st.binary(min_size=32, max_size=32))
def test_words_are_abi_encode(xs: list[int], b32: bytes) -> None:
    assert enc(*xs, b32, ACCOUNTS[0]) == encode(["uint256"] * len(xs) + ["bytes32", "address"], [*xs, b32, ACCOUNTS[0]])
    assert list_hash(xs) == keccak256(encode(["uint256[]"], [xs]))


def test_unencodable_words_raise() -> None:
    for bad in (-1, 2**256, b"\x01" * 31, "0x12", 1.5):
        with pytest.raises(ResultError):
            word(bad)  # type: ignore[arg-type]
    assert word(True) == word(1) and list_hash([]) == keccak256(word(32) + word(0))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 65535), max_size=300), st.integers(0, 2**256 - 1), st.binary(min_size=32, max_size=32))
def test_vector_root_and_commitment(scores: list[int], loss: int, salt: bytes) -> None:
    packed = pack_scores(scores)
    assert packed == b"".join(s.to_bytes(2, "big") for s in scores) and unpack_scores(packed) == tuple(scores)
    root = vector_root(CHAIN, SCORES, ACCOUNTS[1], 12, scores, salt, loss)
    # the scores hash: abi_encode(bytes32[]) of the keccak of each 256-byte segment
    segment_hashes = [keccak256(packed[k:k + 256]) for k in range(0, len(packed), 256)]
    scores_hash = keccak256(encode(["bytes32[]"], [segment_hashes]))
    assert root == keccak256(encode(
        ["bytes32", "uint256", "address", "address", "uint256", "bytes32", "bytes32", "uint256"],
        [keccak256(b"veritrain/vector/v1"), CHAIN, SCORES, ACCOUNTS[1], 12, scores_hash, salt, loss]))
    assert score_commitment(root, salt) == keccak256(root + salt)


def test_bad_score_vectors_raise() -> None:
    for call in (lambda: pack_scores([65536]), lambda: pack_scores([-1]), lambda: unpack_scores(b"\x00")):
        with pytest.raises(ResultError):
            call()


@settings(max_examples=150, deadline=None)
@given(round_inputs())
def test_build_result_header_claims_and_entries(inp: RoundInputs) -> None:
    settled = build_result(inp, CHAIN, RESULTS, CONFIG, MODEL)
    h, res = settled.header, settled.result
    assert h.result_root() == keccak256(encode(
        ["bytes32", "uint256", "address", "bytes32", "uint256", "bytes32", "bytes32", "bytes32", "bytes32", "bytes32",
         "uint256", "uint256", "uint256", "uint256"],
        [tag("veritrain/result/v1"), CHAIN, RESULTS, CONFIG, inp.round, MODEL, h.tree_root, h.validators_hash,
         h.claims_root, h.claims_list_hash, inp.n, res.minted, res.heldout_loss, int(res.quorum)]))
    assert len(h.words()) == 14 and h.tree_root == settled.tree.tree_root()
    for account, cum in zip(inp.miners + inp.validators, res.cumulative + res.validator_cumulative, strict=True):
        claim = settled.claim_of(account)
        assert claim.amount == cum and verify_claim(list(claim.proof), h.claims_root, claim.leaf)
        entry = settled.entry_of(account)
        assert entry is not None and entry.round == inp.round and entry.cumulative == cum
    for i, miner in enumerate(inp.miners):
        entry = settled.entry_of(miner)
        assert entry is not None and entry.index == i and entry.reputation == res.reputation[i]
        leaf = settled.tree.levels[0][i].hash
        assert verify_path(leaf, 0, i, settled.tree.inclusion_path(0, i), settled.tree.depth, h.tree_root)
    outsider = next(a for a in ACCOUNTS if a not in inp.miners + inp.validators)
    assert settled.entry_of(outsider) is None


def test_next_round_chains_through_entries() -> None:
    m, v = ACCOUNTS[0], ACCOUNTS[1]

    def settle(rnd: int, prev: dict) -> object:
        inp = RoundInputs(rnd, (m,), (v,), (1,), {v: Reveal((100,), 5, bytes(32))}, frozenset(), prev, 1000, 5000)
        return build_result(inp, CHAIN, RESULTS, CONFIG, MODEL)

    first = settle(1, {})
    second = settle(2, {m: first.entry_of(m), v: first.entry_of(v)})
    assert second.result.cumulative == (1000,) and second.result.validator_cumulative == (1000,)
    assert second.result.reputation == ((9 * 10 + 100) // 10,)
    assert second.inputs.prev_pointer(m) == (2, 0)  # round 1's entry, stored as q + 1
    with pytest.raises(ResultError):
        first.claim_of(ACCOUNTS[5])
