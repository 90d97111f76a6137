"""A validator answers demands of the leaves of a result it agrees with (validator/demand_answers.py),
through the real contracts on the embedded chain.

Honest signers: a demanded leaf of the right root is answered from the validator's own tree, the
answerer takes the demand's bond, and the root stands. Attack: signers that withhold the tree of
a root (here: nobody answers) lose it: the demand expires, the attempt is rejected and every
signer becomes slashable.
"""

from __future__ import annotations

import pytest

from protocol.chain.backend import advance_time
from protocol.chain.challenge_args import attempt_of
from protocol.chain.client import ChainClient
from protocol.chain.events import EventLog, read_events
from protocol.chain.scripted import post_signed
from protocol.core.errors import ContractRevert
from tests.validator.scripted_result import back_to, played_to_result
from validator.demand_answers import answer_part, open_positions
from validator.demand_bonds import bonds_of
from validator.posted_parts import EVENTS

COLUMN = 1


@pytest.fixture(scope="module")
def at_post():
    """One embedded chain played up to a result, the right result posted, and a snapshot there."""
    deployer, net, r, own = played_to_result()
    post_signed(deployer, net, r, list(own.header.words()))
    return deployer, net, r, own, deployer.handle.tester.take_snapshot()


@pytest.fixture
def posted(at_post):
    deployer, net, r, own, snapshot = at_post
    fresh, again = back_to(deployer, net, snapshot)
    post = [row for row in read_events(fresh, "results", "ResultPosted") if row["round"] == r][-1]
    return fresh, again, r, own, post


def demand(client: ChainClient, post: dict, position: int) -> None:
    client.approve(client.tree_challenges.address, client.read.tree_challenges.challenge_bond())
    client.challenge("tree_challenges", "demand", *attempt_of(post), [position])


def test_a_demanded_leaf_of_the_right_root_is_answered_and_the_root_stands(posted):
    deployer, net, r, own, post = posted
    demander, answerer = net.miners[0].client, net.validators[1].client
    bond = deployer.read.tree_challenges.challenge_bond()
    before = answerer.token_balance(answerer.account.address)
    demand(demander, post, COLUMN)
    logs = {name: EventLog(deployer, "tree_challenges", name) for name in EVENTS}
    assert open_positions(logs, r, int(post["attempt"]), own.inputs.n) == [COLUMN]
    answer_part(answerer, post, own, COLUMN)
    assert open_positions(logs, r, int(post["attempt"]), own.inputs.n) == []
    assert answerer.token_balance(answerer.account.address) == before  # held until the root is final
    with pytest.raises(ContractRevert, match="already settled"):
        answer_part(net.validators[0].client, post, own, COLUMN)  # a second answerer is too late
    advance_time(deployer.handle, int(deployer.read.results.challenge_window()))
    with pytest.raises(ContractRevert, match="already settled"):
        deployer.challenge("tree_challenges", "expire_demand", *attempt_of(post), COLUMN)
    deployer.finalize_result([bytes(w) for w in post["header"]], attempt_of(post)[2], int(post["posted_time"]),
                             int(post["attempt"]))
    assert deployer.call("results", "final_root", r) == own.header.result_root()
    # the bond pays the answerer once the root is final; its own node finds it and collects
    assert bonds_of(logs, answerer.account.address, r, own.inputs.n, 0, True) == [(int(post["attempt"]), COLUMN)]
    answerer.challenge("tree_challenges", "settle_demand", r, int(post["attempt"]), COLUMN)
    assert answerer.token_balance(answerer.account.address) == before + bond


def test_a_root_whose_tree_is_withheld_is_rejected_and_its_signers_are_slashable(posted):
    deployer, net, r, own, post = posted
    demander = net.miners[0].client
    demand(demander, post, COLUMN)
    advance_time(deployer.handle, int(deployer.read.results.challenge_window()) // 2)
    deployer.challenge("tree_challenges", "expire_demand", *attempt_of(post), COLUMN)
    assert deployer.call("results", "pending", r) == b"\x00" * 32
    assert deployer.call("results", "rejected_count", r) == 1
    signer = net.validators[0]
    stake = deployer.call("staking", "staked", signer.address)
    # anyone may send the slash
    deployer.challenge("results", "slash_signer", r, int(post["attempt"]), own.header.result_root(),
                       [str(a) for a in post["non_signers"]], int(post["posted_time"]), signer.address)
    assert deployer.call("staking", "staked", signer.address) < stake


def test_the_lists_demanded_of_the_right_root_are_answered_whole(posted):
    deployer, net, r, own, post = posted
    n = own.inputs.n
    for position in (n + 1, n + 2):  # the validator entries, the claims list
        demand(net.miners[0].client, post, position)
    logs = {name: EventLog(deployer, "tree_challenges", name) for name in EVENTS}
    assert open_positions(logs, r, int(post["attempt"]), n) == [n + 1, n + 2]
    for position in (n + 1, n + 2):
        answer_part(net.validators[1].client, post, own, position)
    assert open_positions(logs, r, int(post["attempt"]), n) == []
