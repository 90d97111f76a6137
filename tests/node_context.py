"""A real `NodeContext` on the embedded eth-tester chain, for tests that exercise node code
through its public methods instead of through a `SimpleNamespace` stand-in (issue 27).

The contracts come from the shipped artifacts (`deploy`); blocks are mined one per transaction,
so nothing waits on a clock. Build one per module: a deployment costs about a second."""

from __future__ import annotations

import logging
from pathlib import Path

from protocol.chain.client import ChainClient
from protocol.chain.deploy import deploy
from protocol.chain.devchain import DevChain
from protocol.config.run_config import RunConfig
from protocol.core.crypto.signing import NodeIdentity, binding_message
from protocol.node.context import NodeContext
from protocol.node.keys import NodeKeys
from protocol.node.node_config import NodeConfig
from protocol.p2p.registry import RegistryEntry, Role


def node_context(data_dir: Path, identity: NodeIdentity | None = None, **config: object) -> NodeContext:
    """A node (account 1 of a fresh devchain) with `config` as its NodeConfig fields."""
    dev = DevChain(funded_accounts=1)
    deployment = deploy(dev.handle, dev.deployer, RunConfig())
    account = dev.node_accounts()[0]
    keys = NodeKeys(account, identity or NodeIdentity.generate())
    client = ChainClient(dev.handle, deployment, account)
    return NodeContext(client, keys, NodeConfig(data_dir=data_dir, **config),  # type: ignore[arg-type]
                       logging.getLogger("test.node"))


def knows(ctx: NodeContext, nodes: dict[str, NodeIdentity], role: Role = "validator") -> NodeContext:
    """`ctx` with exactly `nodes` (account -> node identity) registered: a module-shared context
    starts each test from the registry the test states."""
    for entry in list(ctx.registry.entries()):
        ctx.registry.remove(entry.node_key)
    for account, identity in nodes.items():
        learn(ctx, account, identity, role)
    return ctx


def learn(ctx: NodeContext, account: str, identity: NodeIdentity, role: Role = "validator") -> None:
    """`ctx` learns `account`'s registration as its registry sync would: a signed binding of
    `identity`'s node key to the account, eligible in `role`."""
    registry = ctx.registry
    raw = bytes.fromhex(account[2:])
    sig = identity.sign(binding_message(registry.chain_id, registry.contract, raw))
    registry.upsert(RegistryEntry(identity.public_key, raw, role, 1, 0, "/ip4/127.0.0.1/tcp/1", sig, True))
