"""A round's pipelines as the chain stood when the round opened (PROTOCOL.md §16.7), on the
embedded chain: a stage miner that unbonds after round 0 opened keeps its seat in round 0's
formation, whether it is read again or by a node that never read it before, so a miner at round
open, a validator after the commit phase and an auditor later agree on every seat; a miner that
stakes only after the round opened is not seated."""

from __future__ import annotations

import logging

import pytest
import trio

from protocol.chain.client import ChainClient, Role
from protocol.chain.deploy import deploy
from protocol.chain.devchain import DevChain
from protocol.chain.registration import register_node
from protocol.config.run_config import TOKEN_UNIT, GenesisAllocation, RunConfig
from protocol.config.run_setup import resolve
from protocol.core.crypto.signing import NodeIdentity
from protocol.core.hardware.stage_classes import miner_mask, validator_mask
from protocol.node.context import NodeContext
from protocol.node.keys import NodeKeys
from protocol.node.node_config import NodeConfig
from protocol.node.pinning import prepare
from protocol.node.stage_pipelines import round_pipelines


def staked(admin: ChainClient, account, role: Role, mask: int) -> ChainClient:
    client = admin.with_account(account)
    register_node(client, role, NodeIdentity.generate(), "/ip4/127.0.0.1/tcp/1")
    client.set_hardware_classes(mask)
    params = client.deployment.run_config.chain
    client.stake(((params.min_miner_stake if role == Role.MINER else params.min_validator_stake) + 50) * TOKEN_UNIT)
    return client


def context(admin: ChainClient, account, data) -> NodeContext:
    return NodeContext(admin.with_account(account), NodeKeys(account, NodeIdentity.generate()),
                       NodeConfig(data_dir=data), logging.getLogger("t.formation"))


@pytest.mark.trio
async def test_the_formation_is_read_as_of_the_rounds_opening(tmp_path):
    dev = DevChain(funded_accounts=7)
    accounts = dev.node_accounts()[:7]
    config = RunConfig(training={"preset": "micro", "stages": 2},
                       genesis=[GenesisAllocation(address=a.address, amount=10_000) for a in accounts])
    admin = ChainClient(dev.handle, deploy(dev.handle, dev.deployer, prepare(config), progress=lambda m: None),
                        dev.deployer)
    setup = resolve(admin.deployment.run_config)
    classes, permitted, profile = setup.spec.classes, setup.stage_permitted, setup.profile
    staked(admin, accounts[0], Role.VALIDATOR, validator_mask(classes, permitted, profile))
    miners = [staked(admin, accounts[1 + i], Role.MINER, miner_mask(classes, permitted, profile, i % 2))
              for i in range(4)]
    admin.start()
    late = staked(admin, accounts[5], Role.MINER, miner_mask(classes, permitted, profile, 0))  # after the opening
    first = context(admin, accounts[6], tmp_path / "a")
    with trio.fail_after(60):
        formed = await round_pipelines(first, 0)
        assert len(formed) == 2 and sorted(m for p in formed for m in p) == sorted(c.address for c in miners)
        assert late.address not in {m for p in formed for m in p}
        leaving = formed[0][0]
        next(c for c in miners if c.address == leaving).request_unbond(60 * TOKEN_UNIT)  # below the minimum now
        assert admin.call("staking", "eligible_since", leaving) == 0
        first.formed.clear()
        assert await round_pipelines(first, 0) == formed
        assert await round_pipelines(context(admin, accounts[6], tmp_path / "b"), 0) == formed
