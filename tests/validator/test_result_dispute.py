"""A validator disputes a posted root whose error lies inside it (validator/result_dispute.py),
through the real contracts on the embedded chain.

Attack: every signer signs a root with one value wrong inside it (a column's consensus, an
internal node's sums, a miner's claim, a validator's cumulative) while every header word that
chain data settles is right, so no header challenge applies. If the signers answer the demands
(from what they signed), the answers lead the validator to the wrong value and it sends the
challenge that proves it, which rejects the root; if they withhold a demanded part, the
validator's demand expires and rejects it. Either way the signers become slashable.
"""

from __future__ import annotations

import dataclasses
import logging

import pytest

from protocol.chain.backend import advance_time
from protocol.chain.challenge_args import attempt_of
from protocol.chain.client import ChainClient
from protocol.chain.events import EventLog, read_events
from protocol.chain.scripted import post_signed
from protocol.chain.settlement_history import SettlementHistory
from protocol.config.run_config import TOKEN_UNIT
from protocol.core.settlement.claims_tree import claim_leaf, claims_list_hash, claims_root
from protocol.core.settlement.entries_tree import validator_entries, validators_hash
from protocol.core.settlement.result import RoundResult, compute_result
from protocol.core.settlement.result_header import SettledRound
from protocol.core.settlement.result_tree import ColumnTree
from tests.contracts.result_evidence import with_sums
from tests.validator.scripted_result import back_to, played_to_result
from validator.demand_answers import answer_part, open_positions
from validator.demand_bonds import bonds_of
from validator.posted_parts import EVENTS
from validator.result_challenger import wrong_chain_data_words
from validator.result_dispute import ResultDispute

WRONG = 1
LOG = logging.getLogger("test.result_dispute")


def signed(own: SettledRound, result: RoundResult | None = None, tree: ColumnTree | None = None,
           claims: tuple[bytes, ...] | None = None) -> SettledRound:
    """`own` with its result, tree or claims replaced and the header words that commit to them
    rebuilt: what dishonest signers sign and answer from."""
    result = result or own.result
    tree = tree or ColumnTree.build(own.inputs, result)
    entries = validator_entries(own.inputs, result)
    claims = claims or tuple(own.claim_leaves[:own.inputs.n]) + tuple(
        claim_leaf(v, cum) for v, cum in zip(own.inputs.validators, result.validator_cumulative, strict=True))
    header = dataclasses.replace(own.header, tree_root=tree.tree_root(), validators_hash=validators_hash(entries),
                                 claims_root=claims_root(claims), claims_list_hash=claims_list_hash(claims))
    return dataclasses.replace(own, result=result, tree=tree, entries=entries, claim_leaves=claims, header=header)


def wrong_inside(own: SettledRound) -> SettledRound:
    """`own` with column WRONG's consensus raised: a different tree root, every other word alike."""
    result = compute_result(own.inputs)
    consensus = list(result.consensus)
    consensus[WRONG] += 1
    return signed(own, dataclasses.replace(result, consensus=tuple(consensus)))


def wrong_node(own: SettledRound) -> SettledRound:
    """`own` with the sums of the parent of columns 0 and 1 raised: only that node is wrong."""
    sums = list(own.tree.levels[1][0].sums)
    sums[0] += 1
    return signed(own, tree=with_sums(own.tree, 1, 0, tuple(sums)))


def wrong_claim(own: SettledRound) -> SettledRound:
    """`own` with miner WRONG's claim raised: it follows from no leaf."""
    claims = list(own.claim_leaves)
    claims[WRONG] = claim_leaf(own.inputs.miners[WRONG], own.result.cumulative[WRONG] + 1)
    return signed(own, claims=tuple(claims))


def wrong_entry(own: SettledRound) -> SettledRound:
    """`own` with validator 0's cumulative raised (its claim follows it): a first entry that is not its credit."""
    cumulative = list(own.result.validator_cumulative)
    cumulative[0] += 1
    return signed(own, dataclasses.replace(own.result, validator_cumulative=tuple(cumulative)))


@pytest.fixture(scope="module")
def played():
    deployer, net, r, own = played_to_result()
    return deployer, net, r, own, deployer.handle.tester.take_snapshot()


def post_wrong(played, wrong_of) -> tuple:
    """The chain back at the played round, with `wrong_of(own)` posted signed by every validator."""
    deployer, net, r, own, snapshot = played
    fresh, again = back_to(deployer, net, snapshot)
    fresh.transfer_tokens(again.validators[1].address, 1000 * TOKEN_UNIT)  # the disputer's bonds
    wrong = wrong_of(own)
    post_signed(fresh, again, r, list(wrong.header.words()))
    post = [row for row in read_events(fresh, "results", "ResultPosted") if row["round"] == r][-1]
    assert wrong_chain_data_words(own, post) == []  # nothing for the header challenge
    return fresh, again, r, own, wrong, post


def demand_logs(client: ChainClient) -> dict[str, EventLog]:
    return {name: EventLog(client, "tree_challenges", name) for name in EVENTS}


def verdicts(client: ChainClient, event: str) -> list[int]:
    return sorted(int(e["kind"]) for name in ("column_challenges", "tree_challenges", "account_challenges", "claims_challenges")
                  for e in read_events(client, name, event))


@pytest.mark.parametrize("wrong_of,kind", [(wrong_inside, 1), (wrong_node, 3), (wrong_claim, 12), (wrong_entry, 8)],
                         ids=["column", "node", "claim", "entry"])
def test_answers_lead_to_the_challenge_that_proves_the_wrong_value(played, wrong_of, kind):
    deployer, net, r, own, wrong, post = post_wrong(played, wrong_of)
    disputer = net.validators[1].client
    before = disputer.token_balance(disputer.address)
    dispute = ResultDispute(disputer, post, own, SettlementHistory(deployer).final, LOG)
    logs = demand_logs(deployer)
    demand_until = int(post["posted_time"]) + int(deployer.read.results.challenge_window()) // 4
    for _ in range(10):
        dispute.step(logs, deployer.block_time(), demand_until)
        if dispute.done:
            break
        for position in open_positions(logs, r, int(post["attempt"]), own.inputs.n):
            answer_part(net.validators[0].client, post, wrong, position)  # from what they signed
    assert verdicts(deployer, "ChallengeUpheld") == [kind] and verdicts(deployer, "ChallengeFailed") == []
    assert deployer.call("results", "rejected_count", r) == 1 and deployer.call("results", "pending", r) == b"\x00" * 32
    assert len(dispute.demanded) <= 16
    # the answered demands of the rejected attempt go back to the disputer: its search cost nothing
    for attempt, position in bonds_of(logs, disputer.address, r, own.inputs.n, 1, False):
        disputer.challenge("tree_challenges", "settle_demand", r, attempt, position)
    assert disputer.token_balance(disputer.address) == before


@pytest.mark.parametrize("wrong_of", [wrong_inside, wrong_claim], ids=["tree", "claims"])
def test_a_withheld_part_is_rejected_when_the_validators_demand_expires(played, wrong_of):
    deployer, net, r, own, _, post = post_wrong(played, wrong_of)
    dispute = ResultDispute(net.validators[1].client, post, own, SettlementHistory(deployer).final, LOG)
    logs = demand_logs(deployer)
    window = int(deployer.read.results.challenge_window())
    dispute.step(logs, deployer.block_time(), int(post["posted_time"]) + window // 4)
    assert dispute.demanded and not dispute.done
    advance_time(deployer.handle, window // 2 + 1)  # past the deadline of its last demand
    dispute.step(logs, deployer.block_time(), int(post["posted_time"]) + window // 4)
    assert dispute.done and deployer.call("results", "rejected_count", r) == 1
    (upheld,) = read_events(deployer, "tree_challenges", "ChallengeUpheld")
    assert (upheld["kind"], upheld["challenger"]) == (14, net.validators[1].address)


def test_a_part_a_colluder_demanded_first_and_left_unanswered_is_expired_by_the_disputer(played):
    """A signer demands the part the disputer needs before it can (one demand a part) and never
    answers it: the disputer expires that demand, and the attempt is rejected all the same."""
    deployer, net, r, own, _, post = post_wrong(played, wrong_claim)
    colluder = net.validators[0].client
    deployer.transfer_tokens(colluder.address, 100 * TOKEN_UNIT)
    colluder.approve(colluder.tree_challenges.address, colluder.read.tree_challenges.challenge_bond())
    colluder.challenge("tree_challenges", "demand", *attempt_of(post), [own.inputs.n + 2])
    dispute = ResultDispute(net.validators[1].client, post, own, SettlementHistory(deployer).final, LOG)
    logs = demand_logs(deployer)
    window = int(deployer.read.results.challenge_window())
    dispute.step(logs, deployer.block_time(), int(post["posted_time"]) + window // 4)  # its demand reverts
    advance_time(deployer.handle, window // 2 + 1)
    dispute.step(logs, deployer.block_time(), int(post["posted_time"]) + window // 4)
    assert dispute.done and deployer.call("results", "rejected_count", r) == 1
    (upheld,) = read_events(deployer, "tree_challenges", "ChallengeUpheld")
    assert upheld["kind"] == 14
