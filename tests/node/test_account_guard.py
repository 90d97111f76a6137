"""One live node per account, decided before any transaction (protocol/node/account_guard.py)
on the embedded chain: this node's own registration is found, another address is refused with
the reason (a live node, a twin, or a stale registration) unless `--move` is given, and a
running node sees its account taken over. The probe is the real one in
tests/p2p/test_key_probe.py; here it is a parameter, so each answer can be given."""

from __future__ import annotations

import logging

import pytest
import trio
from eth_account import Account

from protocol.chain.backend import connect, dev_account
from protocol.chain.client import ChainClient, Role
from protocol.chain.deploy import deploy
from protocol.chain.registration import register_node
from protocol.config.run_config import RunConfig
from protocol.core.crypto.signing import NodeIdentity
from protocol.node.account_guard import AccountInUse, RegisteredElsewhere, check_registration
from protocol.node.chain_port import ChainPort
from protocol.node.registry_sync import RegistrySync
from protocol.p2p.registry import RegistryView

LOG = logging.getLogger("test.account_guard")
HERE, THERE = "/ip4/127.0.0.1/tcp/4001", "/ip4/127.0.0.1/tcp/4002"


@pytest.fixture(scope="module")
def deployer() -> ChainClient:
    handle = connect(None)
    admin = dev_account(handle)
    return ChainClient(handle, deploy(handle, admin, RunConfig()), admin)


def registered(deployer: ChainClient, identity: NodeIdentity, addr: str) -> ChainClient:
    account = Account.create()
    deployer.send_eth(account.address, 10**18)
    client = deployer.with_account(account)
    register_node(client, Role.MINER, identity, addr)
    return client


def answers(live: bool) -> object:
    asked: list[tuple[str, bytes]] = []

    def probe(addr: str, key: bytes) -> bool:
        asked.append((addr, key))
        return live

    probe.asked = asked  # type: ignore[attr-defined]
    return probe


def test_this_nodes_own_registration_is_found_and_nobody_is_probed(deployer) -> None:
    me = NodeIdentity.generate()
    client, probe = registered(deployer, me, HERE), answers(True)
    assert check_registration(client, Role.MINER, me, HERE, False, probe).found  # type: ignore[arg-type]
    assert probe.asked == []  # type: ignore[attr-defined]


def test_an_unregistered_account_registers(deployer) -> None:
    account = Account.create()
    check = check_registration(deployer.with_account(account), Role.MINER, NodeIdentity.generate(), HERE, False,
                               answers(True))  # type: ignore[arg-type]
    assert not check.found and check.replaces is None


def test_a_live_twin_with_the_same_keys_is_refused_and_named(deployer) -> None:
    me = NodeIdentity.generate()
    client, probe = registered(deployer, me, THERE), answers(True)
    with pytest.raises(AccountInUse, match=rf"live node at {THERE} \(it proved this node's own key: a twin"):
        check_registration(client, Role.MINER, me, HERE, False, probe)  # type: ignore[arg-type]
    assert probe.asked == [(THERE, me.public_key)]  # type: ignore[attr-defined]


def test_a_live_node_with_another_key_on_the_same_address_is_refused(deployer) -> None:
    other, me = NodeIdentity.generate(), NodeIdentity.generate()
    client = registered(deployer, other, HERE)  # same address, another node key: still not this node's
    with pytest.raises(AccountInUse, match="with another node key"):
        check_registration(client, Role.MINER, me, HERE, False, answers(True))  # type: ignore[arg-type]


def test_a_stale_registration_is_refused_without_move_and_taken_over_with_it(deployer) -> None:
    me = NodeIdentity.generate()
    client = registered(deployer, me, THERE)
    with pytest.raises(RegisteredElsewhere, match=rf"registered at {THERE}, where no node proves .* --move"):
        check_registration(client, Role.MINER, me, HERE, False, answers(False))  # type: ignore[arg-type]
    check = check_registration(client, Role.MINER, me, HERE, True, answers(True))  # type: ignore[arg-type]
    assert not check.found and check.replaces == THERE


def test_a_running_node_sees_its_account_taken_over(deployer) -> None:
    me = NodeIdentity.generate()
    client = registered(deployer, me, HERE)
    view = RegistryView(client.handle.chain_id, bytes.fromhex(client.staking.address[2:]))
    moved: list[str] = []
    sync = RegistrySync(ChainPort(client, LOG), view, LOG, own=(client.address, me.public_key, HERE),
                        on_moved=moved.append)
    trio.run(sync.refresh)
    assert moved == []  # its own binding: nothing to do
    register_node(client, Role.MINER, me, THERE)  # a twin's `--move`
    trio.run(sync.refresh)
    assert moved == [THERE]
