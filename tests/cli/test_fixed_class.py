"""A node's hardware class is fixed once its account has staked: a restart in another class is
refused with one clear error before the node checks anything, and the same class passes."""

from __future__ import annotations

import pytest

from protocol.chain.backend import connect, dev_account
from protocol.chain.client import ChainClient
from protocol.chain.deploy import deploy
from protocol.chain.scripted import join_network
from protocol.cli.node_setup import register_classes as _register_classes
from protocol.config.run_config import RunConfig
from protocol.core.errors import ConfigError


@pytest.fixture(scope="module")
def staked_miner() -> ChainClient:
    handle = connect(None)
    deployer = dev_account(handle)
    client = ChainClient(handle, deploy(handle, deployer, RunConfig()), deployer)
    return join_network(client, 1, 0, lambda _line: None).miners[0].client


def test_a_staked_account_cannot_change_its_class(staked_miner):
    # it never set one, so it runs class 0, the first permitted class
    _register_classes(staked_miner, 1)  # the same class: nothing to send
    with pytest.raises(ConfigError, match=r"registered for hardware class cpu/avx2/1t/float32, fixed since it first staked"):
        _register_classes(staked_miner, 1 << 1)
    assert staked_miner.call("staking", "hardware_classes", staked_miner.address) == 0
