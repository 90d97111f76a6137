"""Typed chain reads (`client.read`) and the one node registration, on the embedded chain:
each reader method answers what its contract getter holds, as a plain int, bool, bytes or
str, after a whole scripted round (a report, a certified result, claims)."""

from __future__ import annotations

from typing import Any

import pytest
from eth_account import Account
from web3.exceptions import ABIFunctionNotFound

from protocol.chain.backend import connect, dev_account
from protocol.chain.bls_registration import ensure_bls_key
from protocol.chain.client import ChainClient, Role
from protocol.chain.deploy import deploy
from protocol.chain.registration import holds_registration, register_node
from protocol.chain.scripted import ScriptedNetwork, claim_all, join_network, play_round
from protocol.config.run_config import TOKEN_UNIT, RunConfig
from protocol.core.crypto.bls import bls_keygen, bls_public_key, g1_to_eip2537
from protocol.core.crypto.signing import NodeIdentity
from protocol.core.errors import ConfigError

LISTEN = "/ip4/127.0.0.1/tcp/4001"


@pytest.fixture(scope="module")
def played() -> tuple[ChainClient, ScriptedNetwork]:
    handle = connect(None)
    deployer = dev_account(handle)
    chain = ChainClient(handle, deploy(handle, deployer, RunConfig()), deployer)
    net = join_network(chain, 2, 3, lambda _line: None)
    play_round(chain, net, lambda _line: None)
    claim_all(net)
    net.miners[0].client.request_unbond(10 * TOKEN_UNIT)
    return chain, net


def raw(chain: ChainClient, contract: str, getter: str, *args: Any) -> Any:
    """The getter's answer through web3 itself, by name, on the whole ABI: what the typed read
    must equal."""
    return getattr(getattr(chain, contract).full.functions, getter)(*args).call()


CONTRACTS = ("token", "staking", "keys", "rounds", "scores", "rewards", "results", "column_challenges",
             "tree_challenges", "account_challenges", "claims_challenges", "disputes")


def test_each_function_resolved_among_its_own_entries_answers_as_the_whole_abi(
        played: tuple[ChainClient, ScriptedNetwork]) -> None:
    """`LeanContract` (protocol/chain/lean_contract.py): every argument-free getter of every
    contract answers as web3's contract on the whole ABI does; an overloaded name (Vyper's
    default argument) keeps all its entries; an unknown name is web3's own error."""
    chain, _ = played
    compared = 0
    for name in CONTRACTS:
        lean = getattr(chain, name)
        for entry in lean.abi:
            if entry.get("type") == "function" and entry["stateMutability"] == "view" and not entry["inputs"]:
                fn = entry["name"]
                assert getattr(lean.functions, fn)().call() == getattr(lean.full.functions, fn)().call(), fn
                assert [e["name"] for e in getattr(lean.functions, fn).contract_abi] == [fn]
                compared += 1
    assert compared > 40
    assert [e["name"] for e in chain.rounds.functions.commit_update.contract_abi] == ["commit_update"] * 2
    with pytest.raises(ABIFunctionNotFound):
        chain.rounds.functions.no_such_getter  # noqa: B018


def test_every_read_answers_its_getter_typed(played: tuple[ChainClient, ScriptedNetwork]) -> None:
    chain, net = played
    read = chain.read
    m, v = net.miners[0].address, net.validators[0].address
    cases: list[tuple[Any, Any]] = [
        (read.staking.role(m), raw(chain, "staking", "role", m)),
        (read.staking.node_key(m), raw(chain, "staking", "node_key", m)),
        (read.staking.multiaddr(m), raw(chain, "staking", "multiaddr", m)),
        (read.staking.hardware_classes(m), raw(chain, "staking", "hardware_classes", m)),
        (read.staking.classes_fixed(m), raw(chain, "staking", "classes_fixed", m)),
        (read.staking.stake_of(m), raw(chain, "staking", "staked", m)),
        (read.staking.unbonding_of(m), raw(chain, "staking", "unbonding", m)),
        (read.staking.unbond_release_time(m), raw(chain, "staking", "unbond_release_time", m)),
        (read.staking.eligible_role(v), raw(chain, "staking", "eligible_role", v)),
        (read.staking.open_reports_against(m), raw(chain, "staking", "open_reports", m)),
        (read.staking.min_class_stake(), raw(chain, "staking", "min_class_stake")),
        (read.staking.eligible_miner_count(), raw(chain, "staking", "eligible_miner_count")),
        (read.staking.total_staked(), raw(chain, "staking", "total_staked")),
        (read.staking.total_unbonding(), raw(chain, "staking", "total_unbonding")),
        (read.staking.total_slashed(), raw(chain, "staking", "total_slashed")),
        (read.keys.bls_key(v), raw(chain, "keys", "key_of", v)),
        (read.keys.has_bls_key(v), raw(chain, "keys", "key_hash", v) != bytes(32)),
        (read.rounds.aggregate_holds(0, v), raw(chain, "rounds", "member_record", 0, v) >> 112 != 0),
        (read.rounds.model_hash(1), raw(chain, "rounds", "model_hash", 1)),
        (read.rounds.finalized(0), raw(chain, "rounds", "finalized", 0)),
        (read.rounds.audit_closed(0), raw(chain, "rounds", "audit_closed", 0)),
        (read.rounds.has_committed(0, m), raw(chain, "rounds", "has_committed", 0, m)),
        (read.rounds.commit_steps(0, net.miners[1].address), raw(chain, "rounds", "commit_steps", 0,
                                                                   net.miners[1].address)),
        (read.rounds.validator_weight(0, v), raw(chain, "rounds", "validator_weight", 0, v)),
        (read.rounds.weights_of(0, [v, m]), raw(chain, "rounds", "weights_of", 0, [v, m])),
        (read.scores.scores_committed(0, v), raw(chain, "scores", "score_commitment", 0, v) != bytes(32)),
        (read.scores.revealed(0, v), raw(chain, "scores", "revealed", 0, v)),
        (read.scores.audited(0, v), raw(chain, "scores", "audited", 0, v)),
        (read.results.result_deadline(0), raw(chain, "results", "result_deadline", 0)),
        (read.results.has_pending(0), raw(chain, "results", "pending", 0) != bytes(32)),
        (read.results.final_root(0), raw(chain, "results", "final_root", 0)),
        (read.results.rejected_count(0), raw(chain, "results", "rejected_count", 0)),
        (read.results.challenge_window(), raw(chain, "results", "challenge_window")),
        (read.column_challenges.challenge_bond(), raw(chain, "column_challenges", "challenge_bond")),
        (read.tree_challenges.challenge_bond(), raw(chain, "tree_challenges", "challenge_bond")),
        (read.rewards.emission_per_round(), raw(chain, "rewards", "emission_per_round")),
        (read.rewards.miner_share_bps(), raw(chain, "rewards", "miner_share_bps")),
        (read.rewards.claims_root(0), raw(chain, "rewards", "claims_root", 0)),
        (read.rewards.claimed(m), raw(chain, "rewards", "claimed", m)),
        (read.rewards.open_reports(0, m), raw(chain, "rewards", "open_reports", 0, m)),
        (read.rewards.total_minted(), raw(chain, "rewards", "total_minted")),
        (read.rewards.total_claimed(), raw(chain, "rewards", "total_claimed")),
        (read.token.total_supply(), raw(chain, "token", "totalSupply")),
        (read.disputes.report_count(), raw(chain, "disputes", "report_count")),
        (read.disputes.report_of(0, net.miners[1].address, v), raw(chain, "disputes", "report_of", 0,
                                                                   net.miners[1].address, v)),
        (read.disputes.vote_of(1, net.validators[1].address), raw(chain, "disputes", "vote_of", 1,
                                                                  net.validators[1].address)),
        (read.disputes.open_in_round(0), raw(chain, "disputes", "open_in_round", 0)),
        (read.disputes.total_bonds(), raw(chain, "disputes", "total_bonds")),
    ]
    for i, (typed, answer) in enumerate(cases):
        assert typed == answer, i
        # plain Python values: no web3 HexBytes or AttributeDict leaks out of a read
        assert type(typed) in (int, bool, bytes, str, list), (i, type(typed))


def test_reads_say_what_the_scripted_round_did(played: tuple[ChainClient, ScriptedNetwork]) -> None:
    chain, net = played
    read, m = chain.read, net.miners[0]
    assert read.staking.role(m.address) == Role.MINER and read.staking.node_key(m.address) == m.identity.public_key
    assert read.staking.unbonding_of(m.address) == 10 * TOKEN_UNIT > 0 < read.staking.unbond_release_time(m.address)
    assert read.rounds.finalized(0) and not read.rounds.finalized(1) and not read.results.has_pending(0)
    assert read.results.final_root(0) != bytes(32) and read.rewards.claims_root(0) != bytes(32)
    assert read.disputes.report_count() == 1 and read.disputes.open_in_round(0) == 0
    assert read.rewards.total_claimed() == sum(read.rewards.claimed(p.address) for p in net.miners + net.validators) > 0
    assert all(read.keys.has_bls_key(v.address) for v in net.validators) and not read.keys.has_bls_key(m.address)
    assert read.keys.bls_key(m.address) == b"" and read.rounds.validator_weight(0, m.address) == 0


def test_one_registration_for_every_caller(played: tuple[ChainClient, ScriptedNetwork]) -> None:
    chain, _ = played
    account, identity = Account.create(), NodeIdentity.generate()
    chain.send_eth(account.address, 10**18)
    node = chain.with_account(account)
    assert not holds_registration(node, Role.VALIDATOR, identity, LISTEN)
    register_node(node, Role.VALIDATOR, identity, LISTEN)
    assert holds_registration(node, Role.VALIDATOR, identity, LISTEN)
    assert not holds_registration(node, Role.VALIDATOR, identity, "/ip4/127.0.0.1/tcp/4002")  # moved
    assert not holds_registration(node, Role.VALIDATOR, NodeIdentity.generate(), LISTEN)  # new node key
    with pytest.raises(ConfigError, match="registered as the other role"):
        holds_registration(node, Role.MINER, identity, LISTEN)
    secret = bls_keygen(b"\x05" * 32)
    assert ensure_bls_key(node, secret) and node.read.keys.bls_key(node.address) == g1_to_eip2537(bls_public_key(secret))
