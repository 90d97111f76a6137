"""A real `NodeContext` on the embedded eth-tester chain, for tests that exercise node code
through its public methods instead of through a `SimpleNamespace` stand-in (issue 27).

The contracts come from the shipped artifacts (`deploy`); blocks are mined one per transaction,
so nothing waits on a clock. Build one per module: a deployment costs about half a second."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from eth_account.signers.local import LocalAccount

from protocol.chain.client import ChainClient, Role
from protocol.chain.deploy import deploy
from protocol.chain.devchain import DevChain
from protocol.config.run_config import TOKEN_UNIT, RunConfig
from protocol.core.crypto.signing import NodeIdentity, binding_message
from protocol.node.context import NodeContext
from protocol.node.keys import NodeKeys
from protocol.node.node_config import NodeConfig
from protocol.p2p import registry as reg

STAKE = {Role.MINER: 150, Role.VALIDATOR: 250}  # tokens: above the default run's minimum for the role


@dataclass
class DeployedChain:
    """A deployed run: the deployer's client and the genesis-funded node accounts not yet used."""

    deployer: ChainClient
    accounts: list[LocalAccount]


def deployed_chain(accounts: int = 1) -> DeployedChain:
    dev = DevChain(funded_accounts=accounts)
    deployer = ChainClient(dev.handle, deploy(dev.handle, dev.deployer, RunConfig()), dev.deployer)
    return DeployedChain(deployer, dev.node_accounts())


def staked(chain: DeployedChain, role: Role) -> ChainClient:
    """A registered node staked in `role` on `chain` (one of its funded accounts)."""
    account, deployer = chain.accounts.pop(), chain.deployer
    deployer.transfer_tokens(account.address, (STAKE[role] + 20) * TOKEN_UNIT)
    node = deployer.with_account(account)
    identity = NodeIdentity.generate()
    sig = identity.sign(binding_message(deployer.handle.chain_id, bytes.fromhex(deployer.staking.address[2:]),
                                        bytes.fromhex(account.address[2:])))
    node.register(role, identity.public_key, "/ip4/127.0.0.1/tcp/1", sig)
    node.stake(STAKE[role] * TOKEN_UNIT)
    return node


def round_0_committed(chain: DeployedChain, steps: int = 0) -> ChainClient:
    """Round 0 started (one staked validator) with one staked miner's commit of `steps` in it."""
    staked(chain, Role.VALIDATOR)
    miner = staked(chain, Role.MINER)
    chain.deployer.start()
    miner.commit_update(0, b"\x01" * 32, b"\x02" * 32, steps)
    return miner


def node_context(data_dir: Path, chain: DeployedChain | None = None, identity: NodeIdentity | None = None,
                 **config: object) -> NodeContext:
    """A node on `chain` (default: a fresh one) with `config` as its NodeConfig fields."""
    chain = chain or deployed_chain()
    account = chain.accounts.pop()
    keys = NodeKeys(account, identity or NodeIdentity.generate())
    client = chain.deployer.with_account(account)
    return NodeContext(client, keys, NodeConfig(data_dir=data_dir, **config),  # type: ignore[arg-type]
                       logging.getLogger("test.node"))


def knows(ctx: NodeContext, nodes: dict[str, NodeIdentity], role: reg.Role = "validator") -> NodeContext:
    """`ctx` with exactly `nodes` (account -> node identity) registered: a module-shared context
    starts each test from the registry the test states."""
    for entry in list(ctx.registry.entries()):
        ctx.registry.remove(entry.node_key)
    for account, identity in nodes.items():
        learn(ctx, account, identity, role)
    return ctx


def learn(ctx: NodeContext, account: str, identity: NodeIdentity, role: reg.Role = "validator") -> None:
    """`ctx` learns `account`'s registration as its registry sync would: a signed binding of
    `identity`'s node key to the account, eligible in `role`."""
    registry = ctx.registry
    raw = bytes.fromhex(account[2:])
    sig = identity.sign(binding_message(registry.chain_id, registry.contract, raw))
    registry.upsert(reg.RegistryEntry(identity.public_key, raw, role, 1, 0, "/ip4/127.0.0.1/tcp/1", sig, True))
