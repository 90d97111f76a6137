"""A validator disputes a posted root whose error lies inside its tree (validator/tree_dispute.py),
through the real contracts on the embedded chain.

Attack: every signer signs a root whose column 1 is wrong (its consensus raised) while every
header word that chain data settles is right, so no header challenge applies. If the signers
answer the demands (from their wrong tree), the answers lead the validator to the wrong leaf
and its column challenge rejects the root; if they withhold the tree, the validator's demand
expires and rejects it. Either way the signers become slashable.
"""

from __future__ import annotations

import dataclasses
import logging

import pytest

from protocol.chain.backend import advance_time
from protocol.chain.client import ChainClient
from protocol.chain.events import EventLog, read_events
from protocol.chain.scripted import post_signed
from protocol.config.run_config import TOKEN_UNIT
from protocol.core.settlement.result import compute_result
from protocol.core.settlement.result_header import SettledRound
from protocol.core.settlement.result_tree import ColumnTree
from tests.validator.scripted_result import back_to, played_to_result
from validator.demand_answers import answer_leaf, open_positions
from validator.result_challenger import wrong_chain_data_words
from validator.tree_dispute import TreeDispute

WRONG = 1
LOG = logging.getLogger("test.tree_dispute")


def wrong_inside(own: SettledRound) -> SettledRound:
    """`own` with column WRONG's consensus raised: a different tree root, every other word alike."""
    result = compute_result(own.inputs)
    consensus = list(result.consensus)
    consensus[WRONG] += 1
    result = dataclasses.replace(result, consensus=tuple(consensus))
    tree = ColumnTree.build(own.inputs, result)
    return dataclasses.replace(own, result=result, tree=tree,
                               header=dataclasses.replace(own.header, tree_root=tree.tree_root()))


@pytest.fixture(scope="module")
def at_wrong_post():
    deployer, net, r, own = played_to_result()
    wrong = wrong_inside(own)
    post_signed(deployer, net, r, list(wrong.header.words()))
    return deployer, net, r, own, wrong, deployer.handle.tester.take_snapshot()


@pytest.fixture
def wrong_post(at_wrong_post):
    deployer, net, r, own, wrong, snapshot = at_wrong_post
    fresh, again = back_to(deployer, net, snapshot)
    fresh.transfer_tokens(again.validators[1].address, 1000 * TOKEN_UNIT)  # the disputer's bonds
    post = [row for row in read_events(fresh, "results", "ResultPosted") if row["round"] == r][-1]
    return fresh, again, r, own, wrong, post


def demand_logs(client: ChainClient) -> dict[str, EventLog]:
    return {name: EventLog(client, "tree_challenges", name) for name in ("LeafDemanded", "LeafAnswered", "RootAnswered")}


def test_answers_from_the_wrong_tree_lead_to_the_wrong_column_and_its_challenge_rejects_the_root(wrong_post):
    deployer, net, r, own, wrong, post = wrong_post
    assert wrong_chain_data_words(own, post) == []  # nothing for the header challenge
    dispute = TreeDispute(net.validators[1].client, post, own, LOG)
    logs = demand_logs(deployer)
    demand_until = int(post["posted_time"]) + int(deployer.read.results.challenge_window()) // 4
    for _ in range(10):
        dispute.step(logs, deployer.block_time(), demand_until)
        if dispute.done:
            break
        signer = net.validators[0].client  # the signers answer from the tree they signed
        for position in open_positions(logs["LeafDemanded"].rows(), logs["LeafAnswered"].rows(),
                                       logs["RootAnswered"].rows(), r, int(post["attempt"]), own.inputs.n):
            answer_leaf(signer, post, wrong, position)
    upheld = read_events(deployer, "column_challenges", "ChallengeUpheld")
    assert [(e["round"], e["kind"]) for e in upheld] == [(r, 1)]
    assert deployer.call("results", "rejected_count", r) == 1 and deployer.call("results", "pending", r) == b"\x00" * 32
    assert len(dispute.demanded) <= 8


def test_a_withheld_tree_is_rejected_when_the_validators_demand_expires(wrong_post):
    deployer, net, r, own, _, post = wrong_post
    dispute = TreeDispute(net.validators[1].client, post, own, LOG)
    logs = demand_logs(deployer)
    window = int(deployer.read.results.challenge_window())
    dispute.step(logs, deployer.block_time(), int(post["posted_time"]) + window // 4)
    assert dispute.demanded and not dispute.done
    advance_time(deployer.handle, window // 2)
    dispute.step(logs, deployer.block_time(), int(post["posted_time"]) + window // 4)
    assert dispute.done and deployer.call("results", "rejected_count", r) == 1
    (upheld,) = read_events(deployer, "tree_challenges", "ChallengeUpheld")
    assert (upheld["kind"], upheld["challenger"]) == (14, net.validators[1].address)
