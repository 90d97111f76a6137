"""A validator that cannot enter a full permitted set is refused before anything is sent: the
chain would revert its stake (`staking: validator set full, stake not above the smallest`)."""

from __future__ import annotations

import pytest
from eth_account import Account

from protocol.chain.backend import connect, dev_account
from protocol.chain.client import ChainClient
from protocol.chain.deploy import deploy
from protocol.chain.scripted import join_network
from protocol.cli.node_setup import check_permit_room
from protocol.config.run_config import TOKEN_UNIT, ChainParams, RunConfig
from protocol.core.errors import ConfigError


def test_a_stake_a_full_permitted_set_would_refuse_is_refused_before_it_is_sent() -> None:
    handle = connect(None)
    deployer = dev_account(handle)
    client = ChainClient(handle, deploy(handle, deployer, RunConfig(chain=ChainParams(max_validator_permits=1))),
                         deployer)
    holder = join_network(client, 0, 1, lambda _line: None).validators[0].client
    held = holder.read.staking.stake_of(holder.address)
    newcomer = ChainClient(handle, client.deployment, Account.create())
    with pytest.raises(ConfigError, match=r"all 1 validator permits of this run are held and the smallest holder "
                                          r"stakes 250"):
        check_permit_room(newcomer, held)  # a tie does not evict
    check_permit_room(newcomer, held + TOKEN_UNIT)  # more does: it would take the permit
    check_permit_room(holder, held)  # a holder only tops up
    assert newcomer.read.staking.permitted_validators() == [holder.address]
