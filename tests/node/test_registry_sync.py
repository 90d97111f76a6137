"""The registry a node keeps from the chain (RegistrySync on the embedded chain): an honest
registration is admitted, a junk one is refused and warned about once per binding, not at
every sweep forever; a validator holding the current round's permit stays admitted though it
lost its eligibility mid-round."""

from __future__ import annotations

import logging

import pytest
import trio
from eth_account import Account

from protocol.chain.backend import connect, dev_account
from protocol.chain.client import ChainClient, Role
from protocol.chain.deploy import deploy
from protocol.chain.registration import register_node
from protocol.chain.scripted import join_network, play_round
from protocol.config.run_config import RunConfig
from protocol.core.crypto.signing import NodeIdentity
from protocol.node.chain_port import ChainPort
from protocol.node.registry_sync import RegistrySync
from protocol.p2p.registry import RegistryView

LOG = logging.getLogger("test.registry_sync")
WARNING = "ignoring registry binding"


@pytest.fixture
def chain() -> ChainClient:
    handle = connect(None)
    deployer = dev_account(handle)
    return ChainClient(handle, deploy(handle, deployer, RunConfig()), deployer)


def new_account(chain: ChainClient) -> ChainClient:
    account = Account.create()
    chain.send_eth(account.address, 10**18)
    return chain.with_account(account)


def warnings_about(caplog: pytest.LogCaptureFixture, account: str) -> int:
    return sum(1 for r in caplog.records if r.getMessage().startswith(WARNING) and account in r.getMessage())


def test_a_junk_binding_is_warned_about_once_per_binding(chain: ChainClient, caplog) -> None:
    honest, junk = new_account(chain), new_account(chain)
    identity = NodeIdentity.generate()
    register_node(honest, Role.MINER, identity, "/ip4/127.0.0.1/tcp/4001")
    # the contract cannot check an ed25519 signature: anyone may register garbage
    junk.register(Role.MINER, NodeIdentity.generate().public_key, "/ip4/127.0.0.1/tcp/4002", b"\x01" * 64)
    view = RegistryView(chain.handle.chain_id, bytes.fromhex(chain.staking.address[2:]))
    sync = RegistrySync(ChainPort(chain, LOG), view, LOG)
    sync.WEIGHTS_EVERY_S = 0.0  # every refresh is a full sweep, as one every 15 s is in a node

    caplog.set_level(logging.WARNING, logger=LOG.name)
    for _ in range(4):
        trio.run(sync.refresh)
    assert view.lookup_by_node_key(identity.public_key) is not None  # the honest node is admitted
    assert warnings_about(caplog, junk.address) == 1 and warnings_about(caplog, honest.address) == 0

    # a new junk binding for the same account is news: said once more, then quiet again
    junk.register(Role.MINER, NodeIdentity.generate().public_key, "/ip4/127.0.0.1/tcp/4003", b"\x02" * 64)
    for _ in range(3):
        trio.run(sync.refresh)
    assert warnings_about(caplog, junk.address) == 2


def test_a_validator_that_unbonds_mid_round_stays_admitted_while_it_holds_the_rounds_permit(chain) -> None:
    """Its permit for the current round stands (it still scores, reveals and signs there, and
    the others wait for it): cutting it off mid-round would only make that round run to its
    deadlines. From the next round, which it holds no permit in, it is dropped."""
    net = join_network(chain, 3, 2, lambda _m: None)
    chain.start()
    leaving = net.validators[1]
    view = RegistryView(chain.handle.chain_id, bytes.fromhex(chain.staking.address[2:]))
    sync = RegistrySync(ChainPort(chain, LOG), view, LOG)
    sync.WEIGHTS_EVERY_S = 0.0

    def admitted() -> bool:
        trio.run(sync.refresh)
        entry = view.lookup_by_node_key(leaving.identity.public_key)
        return entry is not None and entry.eligible

    assert admitted()
    leaving.client.request_unbond(chain.call("staking", "staked", leaving.address))
    assert chain.call("staking", "eligible_role", leaving.address) == 0
    assert admitted()  # round 0's permit
    play_round(chain, net, lambda _m: None, cheat=False)
    assert chain.current_round() == 1 and not admitted()
