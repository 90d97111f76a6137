"""Choosing the challenge that proves a posted part wrong (validator/fault_proofs.py).

Each choice must be one the contract upholds (tests/contracts/test_challenges.py shows each kind
upheld on such a value): a leaf whose link to its earlier entry is wrong is a history challenge,
one that skips the newer final entry a stale-pointer challenge, and only values recomputed from
the reveals go to the column challenge; a leaf equal to this validator's proves nothing.
"""

from __future__ import annotations

import dataclasses

from protocol.core.crypto.keccak import checksum_address, keccak256
from protocol.core.settlement.result_header import SettledRound, build_result
from protocol.core.settlement.result_inputs import Reveal, RoundInputs
from validator.fault_proofs import leaf_proof
from validator.posted_parts import PostedLeaf

A = [checksum_address(keccak256(b"proof account %d" % k)[:20]) for k in range(8)]
T = 10**18
MINERS, VALIDATORS = tuple(A[:4]), (A[5], A[6])
ROOT = (b"\x01" * 32, [1])  # a posted root preimage (the column challenge carries it)


def settled(round_: int, prev: dict) -> SettledRound:
    inputs = RoundInputs(
        round=round_, miners=MINERS, validators=VALIDATORS, weights=(2 * T, T),
        reveals={v: Reveal(tuple(1000 * (i + 1) + k for i in range(4)), 500_000, keccak256(v.encode()))
                 for k, v in enumerate(VALIDATORS)},
        forfeited=frozenset(), prev=prev, emission=1000 * T, miner_share_bps=7000)
    return build_result(inputs, 1, A[7], keccak256(b"run"), keccak256(b"model"))


FIRST = settled(1, {})
SECOND = settled(2, {a: FIRST.entry_of(a) for a in (*MINERS, *VALIDATORS)})


def finals(q: int) -> SettledRound | None:
    return FIRST if q == 1 else None


def posted(i: int, **changes: int) -> PostedLeaf:
    """Column i of SECOND as its signers answered it, with some fields changed."""
    tree, result = SECOND.tree, SECOND.result
    prev, prev_index = SECOND.inputs.prev_pointer(MINERS[i])
    fields = dict(index=i, miner=int(MINERS[i], 16), reputation=result.reputation[i],
                  cumulative=result.cumulative[i], prev=prev, prev_index=prev_index) | changes
    path = tree.inclusion_path(0, i)
    return PostedLeaf(i, tuple(fields.values()), tuple(tree.levels[0][i].sums), tuple(s for s, _ in path),
                      tuple(h for _, h in path))


def test_a_leaf_equal_to_this_validators_proves_nothing():
    assert leaf_proof(SECOND, posted(1), ROOT, finals) is None


def test_a_wrong_cumulative_after_an_earlier_entry_is_a_history_challenge():
    proof = leaf_proof(SECOND, posted(1, cumulative=SECOND.result.cumulative[1] + 1), ROOT, finals)
    assert proof is not None and proof.function == "challenge_miner_history"
    header, prev_leaf = proof.args[3], proof.args[4]
    assert header == list(FIRST.header.words()) and prev_leaf[1] == int(MINERS[1], 16)


def test_a_pointer_to_a_round_that_is_not_final_is_a_history_challenge_without_evidence():
    proof = leaf_proof(SECOND, posted(2, prev=3), ROOT, finals)  # names round 2 itself: not earlier, not final
    assert proof is not None and proof.function == "challenge_miner_history" and proof.args[3] == [b"\x00" * 32] * 15


def test_a_leaf_that_forgets_its_earlier_entry_is_a_stale_pointer_challenge():
    proof = leaf_proof(SECOND, posted(3, prev=0, prev_index=0), ROOT, finals)
    assert proof is not None and proof.function == "challenge_miner_stale"
    assert proof.args[3] == 1 and proof.args[5] == 3  # round 1, where the miner is column 3


def test_a_wrong_sum_or_miner_is_a_column_challenge_once_the_root_is_known():
    leaf = posted(0)
    wrong = dataclasses.replace(leaf, sums=(leaf.sums[0] + 1, *leaf.sums[1:]))
    assert leaf_proof(SECOND, wrong, None, finals) is None  # waits for the root preimage
    proof = leaf_proof(SECOND, wrong, ROOT, finals)
    assert proof is not None and (proof.contract, proof.function) == ("column_challenges", "challenge_column")
