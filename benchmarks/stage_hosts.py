"""Running libp2p hosts on 127.0.0.1 in this process, for the benchmarks that need a real link:
deterministic identities, each node's registry view admitting all of them at their listen
addresses (what the p2p tests' `cluster` builds, without importing test code).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import blake3

from protocol.core.crypto.signing import NodeIdentity, binding_message
from protocol.p2p import DirectoryBlobSource, P2PConfig, P2PNode, RegistryEntry, RegistryView

# libp2p logs every dial and stream at INFO: handling that slows the hosts measurably
logging.getLogger("libp2p").setLevel(logging.WARNING)

CHAIN_ID = 31337
CONTRACT = bytes.fromhex("5fbdb2315678afecb367f032d93f642f64180aa3")


def identity(i: int) -> NodeIdentity:
    return NodeIdentity(blake3.blake3(b"veritrain-bench-stage-node-%d" % i).digest())


def _account(i: int) -> bytes:
    return blake3.blake3(b"veritrain-bench-stage-account-%d" % i).digest()[:20]


def entry(i: int, multiaddr: str) -> RegistryEntry:
    """Node i, staked and bound to its account: admitted at the connection."""
    ident, acct = identity(i), _account(i)
    return RegistryEntry(node_key=ident.public_key, account=acct, role="miner", stake=10**18, reputation=65535,
                         multiaddr=multiaddr, binding_sig=ident.sign(binding_message(CHAIN_ID, CONTRACT, acct)),
                         eligible=True)


def config() -> P2PConfig:
    return P2PConfig(chain_id=CHAIN_ID, contract=CONTRACT)


@asynccontextmanager
async def hosts(folder: Path, n: int) -> AsyncIterator[list[P2PNode]]:
    """`n` running nodes, each with its own registry view of all of them (blobs under `folder`)."""
    regs = [RegistryView(CHAIN_ID, CONTRACT) for _ in range(n)]
    nodes = [P2PNode(identity(i), config(), regs[i], DirectoryBlobSource(folder / f"store{i}")) for i in range(n)]
    async with AsyncExitStack() as stack:
        for node in nodes:
            await stack.enter_async_context(node.run())
        for reg in regs:
            for i, node in enumerate(nodes):
                reg.upsert(entry(i, node.listen_addr))
        yield nodes
