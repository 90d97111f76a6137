"""The result header, score vectors and ABI words (docs/PROTOCOL.md §11.1, §11.7), against eth_abi."""

from __future__ import annotations

import pytest
from eth_abi import encode
from hypothesis import given, settings
from hypothesis import strategies as st
from result_strategies import ACCOUNTS, round_inputs

from protocol.core.crypto.keccak import keccak256
from protocol.core.errors import ResultError
from protocol.core.settlement.abi_words import tag
from protocol.core.settlement.claims_tree import verify_claim
from protocol.core.settlement.result_header import build_result
from protocol.core.settlement.result_inputs import Reveal, RoundInputs
from protocol.core.settlement.result_tree import verify_path
from protocol.core.settlement.score_vector import (
    pack_segments,
    score_commitment,
    unpack_segments,
    vector_root,
)

CHAIN, RESULTS, SCORES = 31337, ACCOUNTS[70], ACCOUNTS[71]
CONFIG, MODEL = keccak256(b"config"), keccak256(b"model")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 65535), max_size=2500), st.integers(0, 2**256 - 1), st.binary(min_size=32, max_size=32))
def test_vector_root_and_commitment(scores: list[int], loss: int, salt: bytes) -> None:
    segments = pack_segments(scores)
    # per 1,024 columns: (column, score) of each nonzero score, 2 bytes big-endian each
    assert segments == [b"".join(c.to_bytes(2, "big") + s.to_bytes(2, "big") for c, s in enumerate(scores)
                                 if s and k <= c < k + 1024) for k in range(0, len(scores), 1024)]
    assert unpack_segments(segments, len(scores)) == tuple(scores)
    root = vector_root(CHAIN, SCORES, ACCOUNTS[1], 12, scores, salt, loss)
    scores_hash = keccak256(encode(["bytes32[]"], [[keccak256(seg) for seg in segments]]))
    assert root == keccak256(encode(
        ["bytes32", "uint256", "address", "address", "uint256", "bytes32", "bytes32", "uint256"],
        [keccak256(b"veritrain/vector/v1"), CHAIN, SCORES, ACCOUNTS[1], 12, scores_hash, salt, loss]))
    assert score_commitment(root, salt) == keccak256(root + salt)


def test_bad_score_vectors_raise() -> None:
    for call in (lambda: pack_segments([65536]), lambda: pack_segments([-1]), lambda: pack_segments([1] * 65537),
                 lambda: unpack_segments([b"", b""], 1024), lambda: unpack_segments([], 1)):
        with pytest.raises(ResultError):
            call()
    # whatever bytes a validator reveals read as scores: the first whole entry naming a column counts
    assert unpack_segments([bytes.fromhex("00010007" "00010009" "04000001" "0000")], 3) == (0, 7, 0)



@settings(max_examples=150, deadline=None)
@given(round_inputs())
def test_build_result_header_claims_and_entries(inp: RoundInputs) -> None:
    settled = build_result(inp, CHAIN, RESULTS, CONFIG, MODEL)
    h, res = settled.header, settled.result
    assert h.result_root() == keccak256(encode(
        ["bytes32", "uint256", "address", "bytes32", "uint256", "bytes32", "bytes32", "bytes32", "bytes32", "bytes32",
         "uint256", "uint256", "uint256", "uint256", "bytes32"],
        [tag("veritrain/result/v1"), CHAIN, RESULTS, CONFIG, inp.round, MODEL, h.tree_root, h.validators_hash,
         h.claims_root, h.claims_list_hash, inp.n, res.minted, res.heldout_loss, int(res.quorum), bytes(32)]))
    assert len(h.words()) == 15 and h.tree_root == settled.tree.tree_root()
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
