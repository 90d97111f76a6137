"""Data availability of a pending result (contracts/result_demands.vy, exported by TreeChallenges).

Attack: signers holding more than 2/3 finalize a wrong root by withholding its tree, since a
challenger cannot prove a leaf it has never seen. A demand of one leaf that nobody answers in
time rejects the attempt (its signers become slashable) and returns the demander's bond. Honest
signers: an answer with the leaf and its path takes the bond, and the leaf's event lets anyone
challenge it; the root's preimage is demanded as position n, the validator entries as n + 1 and
the claims chunk summaries as n + 2 and claims chunk c as n + 3 + c, each answered whole and
checked against its header word. The bond of
an answered demand pays the answerer once the root is final and goes back to the demander when
it is rejected (answering a wrong result earns nothing). Spam: each demand costs the bond when
answered, and an account makes at most 24 a round (enough for an
honest search through the largest tree).
"""

from __future__ import annotations

import boa
import pytest

from protocol.core.crypto.keccak import checksum_address, keccak256
from protocol.core.settlement.claims_tree import chunk_summaries, claim_chunks
from protocol.core.settlement.result_inputs import Reveal, RoundInputs
from tests.contracts.result_evidence import (
    BOND,
    WINDOW,
    deploy,
    entries_arg,
    finalize,
    leaf_args,
    post,
    publish,
    root_arg,
    settle,
)
from validator.result_dispute import MAX_DEMANDS  # the node's budget is the contract's cap

A = [checksum_address(keccak256(b"demand account %d" % k)[:20]) for k in range(44)]
T = 10**18

ROUND = RoundInputs(
    round=1, miners=tuple(A[0:6]), validators=(A[10], A[11], A[12]), weights=(3 * T, 2 * T, T),
    reveals={v: Reveal(tuple((k * 7919 + i * 104729) % 60000 for i in range(6)), 500_000, keccak256(v.encode()))
             for k, v in enumerate((A[10], A[11], A[12]))},
    forfeited=frozenset(), prev={}, emission=1000 * T, miner_share_bps=7000)


@pytest.fixture
def world():
    """A fresh stack with round 1's result pending; the demander is the stack's challenger and an
    answering signer holds no tokens (it earns the bond)."""
    with boa.env.anchor():
        stack = deploy()
        publish(stack, ROUND)
        posted = settle(stack, ROUND)
        attempt = post(stack, posted)
        stack.token.approve(stack.trees.address, 100 * BOND, sender=stack.challenger)
        yield stack, posted, attempt


def demand(stack, attempt, position, sender=None):
    return stack.trees.demand(*attempt, [position], sender=sender or stack.challenger)


def test_an_answered_demand_logs_the_leaf_and_its_bond_pays_the_answerer_once_the_root_is_final(world):
    stack, posted, attempt = world
    signer = boa.env.generate_address("signer")
    before = stack.token.balanceOf(stack.challenger)
    demand(stack, attempt, 4)
    assert stack.token.balanceOf(stack.challenger) == before - BOND
    leaf, sums, path = leaf_args(posted, 4)
    stack.trees.answer_leaf(*attempt, leaf, sums, path, sender=signer)
    (answered,) = [e for e in stack.trees.get_logs() if type(e).__name__ == "LeafAnswered"]
    assert (answered.position, list(answered.fields), list(answered.sums)) == (4, list(leaf), sums)
    assert stack.token.balanceOf(signer) == 0 and stack.results.rejected(1) == 0  # held until the end
    with boa.reverts("demands: already settled"):
        stack.trees.answer_leaf(*attempt, leaf, sums, path, sender=signer)
    boa.env.time_travel(seconds=WINDOW // 2)
    with boa.reverts("demands: already settled"):
        stack.trees.expire_demand(*attempt, 4)  # an answered demand never rejects
    with boa.reverts("demands: attempt not settled"):
        stack.trees.settle_demand(1, attempt[4], 4)
    finalize(stack, posted)
    stack.trees.settle_demand(1, attempt[4], 4, sender=boa.env.generate_address("anyone"))
    assert stack.token.balanceOf(signer) == BOND and stack.results.rejected(1) == 0
    with boa.reverts("demands: nothing to pay"):
        stack.trees.settle_demand(1, attempt[4], 4)


def test_the_answered_demands_of_a_rejected_attempt_go_back_to_their_demander(world):
    """Answering the parts of a wrong result earns nothing: an honest disputer's search is free."""
    stack, posted, attempt = world
    signer = boa.env.generate_address("signer")
    before = stack.token.balanceOf(stack.challenger)
    demand(stack, attempt, 4)
    demand(stack, attempt, 2)
    stack.trees.answer_leaf(*attempt, *leaf_args(posted, 4), sender=signer)
    boa.env.time_travel(seconds=WINDOW // 2)
    stack.trees.expire_demand(*attempt, 2)  # rejects the attempt; this bond comes back at once
    for position in (4,):  # the answered one, once the attempt is rejected
        stack.trees.settle_demand(1, attempt[4], position)
    assert stack.token.balanceOf(stack.challenger) == before and stack.token.balanceOf(signer) == 0
    with boa.reverts("demands: nothing to pay"):
        stack.trees.settle_demand(1, attempt[4], 2)  # expired: paid already


def test_an_unanswered_demand_rejects_the_attempt_and_returns_the_bond(world):
    stack, _, attempt = world
    before = stack.token.balanceOf(stack.challenger)
    demand(stack, attempt, 2)
    with boa.reverts("demands: deadline not reached"):
        stack.trees.expire_demand(*attempt, 2)
    boa.env.time_travel(seconds=WINDOW // 2)
    stack.trees.expire_demand(*attempt, 2, sender=boa.env.generate_address("anyone"))
    assert stack.results.rejected(1) == 1 and stack.results.reporter(1) == stack.challenger
    assert stack.token.balanceOf(stack.challenger) == before


def test_the_deadline_falls_a_quarter_window_before_the_attempt_can_be_finalized(world):
    """Demands in the first quarter, answers within half a window: the last deadline is at 3/4."""
    stack, _, attempt = world
    posted_time = attempt[3]
    boa.env.time_travel(seconds=WINDOW // 4 - 1)  # the last second a demand may be made
    demand(stack, attempt, 0)
    deadline = stack.trees.demands(keccak256(_key(1, attempt[4], 0))).deadline
    assert deadline + WINDOW // 4 <= posted_time + WINDOW
    boa.env.time_travel(seconds=1)
    with boa.reverts("demands: first quarter of the window only"):
        demand(stack, attempt, 1)


def _key(round_: int, attempt: int, position: int) -> bytes:
    return round_.to_bytes(32, "big") + attempt.to_bytes(32, "big") + position.to_bytes(32, "big")


def test_the_root_preimage_is_demanded_as_position_n_and_answered_with_its_body_and_sums(world):
    stack, posted, attempt = world
    signer = boa.env.generate_address("signer")
    demand(stack, attempt, posted.inputs.n)
    body, sums = root_arg(posted)
    with boa.reverts("challenges: root preimage"):
        stack.trees.answer_root(*attempt, (body, [sums[0] + 1, *sums[1:]]), sender=signer)
    stack.trees.answer_root(*attempt, (body, sums), sender=signer)
    (answered,) = [e for e in stack.trees.get_logs() if type(e).__name__ == "RootAnswered"]
    assert (answered.body, list(answered.sums)) == (body, sums)


def test_an_answer_that_is_not_the_leaf_of_the_root_reverts(world):
    stack, posted, attempt = world
    demand(stack, attempt, 3)
    leaf, sums, path = leaf_args(posted, 3)
    forged = (leaf[0], leaf[1], leaf[2] + 1, *leaf[3:])
    with boa.reverts("challenges: leaf not in tree"):
        stack.trees.answer_leaf(*attempt, forged, sums, path)
    other, other_sums, other_path = leaf_args(posted, 1)
    with boa.reverts("demands: no such demand"):  # an undemanded leaf earns nothing
        stack.trees.answer_leaf(*attempt, other, other_sums, other_path)


def test_demands_are_capped_per_account_and_one_per_leaf(world):
    stack, _, attempt = world
    other = boa.env.generate_address("second demander")
    stack.token.transfer(other, 10 * BOND, sender=stack.challenger)
    stack.token.approve(stack.trees.address, 10 * BOND, sender=other)
    demand(stack, attempt, 0)
    with boa.reverts("demands: already demanded"):
        demand(stack, attempt, 0, sender=other)
    # 6 = n: the root preimage, 7: the validator entries, 8: the claims summaries, 9: claims chunk 0
    for position in range(1, 10):
        demand(stack, attempt, position)
    with boa.reverts("demands: no such part"):
        demand(stack, attempt, 10)  # a right list of 6 + 4 claims has one chunk: n + 3 is the last part
    assert stack.trees.demands_made(1, stack.challenger) == 10


def test_the_demand_cap_is_twenty_four_a_round():
    big = RoundInputs(
        round=1, miners=tuple(A[20:44]), validators=(A[10], A[11], A[12]), weights=(3 * T, 2 * T, T),
        reveals={v: Reveal(tuple(1000 * (i + 1) for i in range(24)), 500_000, keccak256(v.encode()))
                 for v in (A[10], A[11], A[12])},
        forfeited=frozenset(), prev={}, emission=1000 * T, miner_share_bps=7000)
    with boa.env.anchor():
        stack = deploy()
        publish(stack, big)
        attempt = post(stack, settle(stack, big))
        stack.token.approve(stack.trees.address, 100 * BOND, sender=stack.challenger)
        for position in range(MAX_DEMANDS):
            demand(stack, attempt, position)
        with boa.reverts("demands: demand cap reached"):
            demand(stack, attempt, MAX_DEMANDS)


def test_a_demand_against_an_attempt_that_is_not_pending_reverts(world):
    stack, _, attempt = world
    stale = (attempt[0], attempt[1], attempt[2], attempt[3], attempt[4] + 1)
    with boa.reverts("challenges: not the pending attempt"):
        demand(stack, stale, 0)


def test_the_validator_entries_are_demanded_as_n_plus_1_and_answered_whole(world):
    stack, posted, attempt = world
    signer = boa.env.generate_address("signer")
    demand(stack, attempt, posted.inputs.n + 1)
    entries = entries_arg(posted)
    # as an answer carries them: (credit, cumulative, prev << 32 | prev_index), index and account the position's
    answers = [(credit, cumulative, prev << 32 | prev_index) for _, _, credit, cumulative, prev, prev_index in entries]
    forged = [answers[0], (answers[1][0], answers[1][1] + 1, answers[1][2]), *answers[2:]]
    with boa.reverts("challenges: entries do not match validators_hash"):
        stack.trees.answer_validators(*attempt, forged, sender=signer)
    with boa.reverts("challenges: one entry per round validator"):  # a list whose tree a zero leaf pads
        stack.trees.answer_validators(*attempt, answers[:-1], sender=signer)
    stack.trees.answer_validators(*attempt, answers, sender=signer)
    (answered,) = [e for e in stack.trees.get_logs() if type(e).__name__ == "ValidatorsAnswered"]
    assert [tuple(e) for e in answered.entries] == entries


def test_the_claims_are_demanded_as_summaries_at_n_plus_2_and_chunks_after(world):
    stack, posted, attempt = world
    signer = boa.env.generate_address("signer")
    n, summaries, chunks = posted.inputs.n, chunk_summaries(posted.claims), claim_chunks(posted.claims)
    demand(stack, attempt, n + 2)
    with boa.reverts("challenges: claims do not match claims_list_hash"):
        stack.trees.answer_claims(*attempt, summaries[::-1], sender=signer)
    stack.trees.answer_claims(*attempt, summaries, sender=signer)
    (answered,) = [e for e in stack.trees.get_logs() if type(e).__name__ == "ClaimsAnswered"]
    assert list(answered.summaries) == summaries
    demand(stack, attempt, n + 3)
    with boa.reverts("challenges: claims do not match their chunk"):
        stack.trees.answer_claims_chunk(*attempt, summaries, 0, chunks[0][:-1], sender=signer)
    stack.trees.answer_claims_chunk(*attempt, summaries, 0, chunks[0], sender=signer)
    (answered,) = [e for e in stack.trees.get_logs() if type(e).__name__ == "ClaimsChunkAnswered"]
    assert (answered.chunk, list(answered.claims)) == (0, posted.claims)


def test_a_withheld_claims_list_rejects_the_attempt(world):
    """The claims list pays: signers that keep it to themselves cannot finalize it."""
    stack, posted, attempt = world
    demand(stack, attempt, posted.inputs.n + 2)
    boa.env.time_travel(seconds=WINDOW // 2)
    stack.trees.expire_demand(*attempt, posted.inputs.n + 2)
    assert stack.results.rejected(1) == 1 and stack.results.reporter(1) == stack.challenger


def test_several_parts_are_demanded_in_one_transaction_each_with_its_bond(world):
    """A search step is one transaction (one block), whatever it demands; each part is bonded,
    counted against the cap and logged on its own, and a batch holding a part already demanded
    reverts whole, so no bond is taken for it."""
    stack, posted, attempt = world
    n = posted.inputs.n
    before = stack.token.balanceOf(stack.challenger)
    stack.trees.demand(*attempt, [0, 3, n, n + 2], sender=stack.challenger)
    assert stack.token.balanceOf(stack.challenger) == before - 4 * BOND
    demanded = [e.position for e in stack.trees.get_logs() if type(e).__name__ == "Demanded"]
    assert demanded == [0, 3, n, n + 2] and stack.trees.demands_made(1, stack.challenger) == 4
    with boa.reverts("demands: already demanded"):
        stack.trees.demand(*attempt, [1, 3], sender=stack.challenger)
    assert stack.trees.demands_made(1, stack.challenger) == 4
