"""A scripted round played up to its result on the embedded chain, for the result-phase tests."""

from __future__ import annotations

import dataclasses
import hashlib

from protocol.chain.backend import connect, dev_account
from protocol.chain.client import ChainClient
from protocol.chain.deploy import deploy
from protocol.chain.scripted import ScriptedNetwork, join_network, play_to_result
from protocol.chain.settlement_history import SettlementHistory
from protocol.chain.tx import TxSender
from protocol.config.run_config import RunConfig
from protocol.core.settlement.result_header import SettledRound


def played_to_result() -> tuple[ChainClient, ScriptedNetwork, int, SettledRound]:
    """3 miners and 2 validators on a fresh embedded chain, round r played honestly up to its
    result (nothing posted), and the result every validator computes."""
    handle = connect(None)
    deployer = ChainClient(handle, deploy(handle, dev_account(handle), RunConfig()), dev_account(handle))
    net = join_network(deployer, 3, 2, lambda _m: None)
    r = play_to_result(deployer, net, lambda _m: None, cheat=False)
    own = SettlementHistory(deployer).settle(r, hashlib.sha256(b"next model").digest())
    return deployer, net, r, own


def back_to(deployer: ChainClient, net: ScriptedNetwork, snapshot: object) -> tuple[ChainClient, ScriptedNetwork]:
    """The chain reverted to `snapshot`, with clients whose nonce tracker is fresh (the reverted
    chain forgot the last test's transactions)."""
    deployer.handle.tester.revert_to_snapshot(snapshot)
    fresh = ChainClient(deployer.handle, deployer.deployment, deployer.account, TxSender(deployer.w3))
    again = ScriptedNetwork(*[[dataclasses.replace(p, client=fresh.with_account(p.account)) for p in group]
                              for group in (net.miners, net.validators)])
    return fresh, again
