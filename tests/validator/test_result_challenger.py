"""A validator disputes a posted result whose header is wrong in words chain data settles,
with no tree from the signers; a right header gives it nothing to dispute."""

from __future__ import annotations

import dataclasses
import hashlib

import pytest

from protocol.chain.backend import connect, dev_account
from protocol.chain.client import ChainClient
from protocol.chain.deploy import deploy
from protocol.chain.events import read_events
from protocol.chain.scripted import ScriptedNetwork, join_network, play_to_result, post_signed
from protocol.chain.settlement_history import SettlementHistory
from protocol.chain.tx import TxSender
from protocol.config.run_config import RunConfig
from protocol.core.errors import ContractRevert
from protocol.core.settlement.abi_words import word
from validator.result_challenger import challenge_header_words, wrong_chain_data_words

H_N, H_LOSS = 10, 12


@pytest.fixture(scope="module")
def at_result():
    """One embedded chain played up to a result (no result posted yet), and a snapshot there."""
    handle = connect(None)
    deployer = ChainClient(handle, deploy(handle, dev_account(handle), RunConfig()), dev_account(handle))
    net = join_network(deployer, 3, 2, lambda _m: None)
    r = play_to_result(deployer, net, lambda _m: None, cheat=False)
    own = SettlementHistory(deployer).settle(r, hashlib.sha256(b"next model").digest())
    return deployer, net, r, own, handle.tester.take_snapshot()


@pytest.fixture
def to_result(at_result):
    """Each test starts from the module's snapshot, with clients whose nonce tracker is fresh
    (the reverted chain forgot the last test's transactions)."""
    deployer, net, r, own, snapshot = at_result
    deployer.handle.tester.revert_to_snapshot(snapshot)
    fresh = ChainClient(deployer.handle, deployer.deployment, deployer.account, TxSender(deployer.w3))
    again = ScriptedNetwork(*[[dataclasses.replace(p, client=fresh.with_account(p.account)) for p in group]
                              for group in (net.miners, net.validators)])
    return fresh, again, r, own


def posted_row(client: ChainClient, r: int) -> dict:
    return [row for row in read_events(client, "results", "ResultPosted") if row["round"] == r][-1]


@pytest.mark.parametrize("k,value", [(H_N, 7), (H_LOSS, 1)])
def test_a_header_wrong_in_chain_data_is_challenged_and_rejected(to_result, k, value):
    deployer, net, r, own = to_result
    header = list(own.header.words())
    header[k] = word(value)
    post_signed(deployer, net, r, header)  # every validator signed the wrong header
    post = posted_row(deployer, r)
    assert wrong_chain_data_words(own, post) == [{H_N: "n", H_LOSS: "heldout_loss"}[k]]
    challenger = net.miners[0].client
    before = challenger.token_balance(challenger.account.address)
    challenge_header_words(challenger, own, post)
    assert deployer.call("results", "pending", r) == b"\x00" * 32
    assert deployer.call("results", "rejected_count", r) == 1
    assert challenger.token_balance(challenger.account.address) == before  # the bond came back
    with pytest.raises(ContractRevert, match="not the pending attempt"):
        challenge_header_words(net.miners[1].client, own, post)  # a second challenger is too late


def test_a_right_header_gives_nothing_to_dispute(to_result):
    deployer, net, r, own = to_result
    post_signed(deployer, net, r, list(own.header.words()))
    assert wrong_chain_data_words(own, posted_row(deployer, r)) == []
    assert deployer.call("results", "pending", r) != b"\x00" * 32
