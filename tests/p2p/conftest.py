"""Fixtures for p2p tests: deterministic identities, registry entries, running nodes."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import blake3
import trio

from protocol.core.crypto.signing import NodeIdentity, binding_message
from protocol.core.wire.messages import UpdateAnnounced, to_hex
from protocol.p2p import (
    DirectoryBlobSource,
    DirectoryStageSegments,
    MemoryCheckpointSource,
    P2PConfig,
    P2PNode,
    RegistryEntry,
    RegistryView,
)

# libp2p logs every dial and stream at INFO; capturing that slows the hosts measurably.
logging.getLogger("libp2p").setLevel(logging.WARNING)

CHAIN_ID = 31337
CONTRACT = bytes.fromhex("5fbdb2315678afecb367f032d93f642f64180aa3")
STAKE = 10**18
REPUTATION = 32768


def identity(i: int) -> NodeIdentity:
    return NodeIdentity(blake3.blake3(b"veritrain-test-node-%d" % i).digest())


def account(i: int) -> bytes:
    return blake3.blake3(b"veritrain-test-account-%d" % i).digest()[:20]


def entry_for(
    i: int,
    multiaddr: str = "",
    *,
    role: str = "miner",
    stake: int = STAKE,
    reputation: int = REPUTATION,
    ident: NodeIdentity | None = None,
    eligible: bool = True,
) -> RegistryEntry:
    ident = ident or identity(i)
    acct = account(i)
    sig = ident.sign(binding_message(CHAIN_ID, CONTRACT, acct))
    return RegistryEntry(
        node_key=ident.public_key,
        account=acct,
        role=role,  # type: ignore[arg-type]
        stake=stake,
        reputation=reputation,
        multiaddr=multiaddr,
        binding_sig=sig,
        eligible=eligible,
    )


def p2p_config(**overrides: Any) -> P2PConfig:
    base = P2PConfig(chain_id=CHAIN_ID, contract=CONTRACT, read_timeout_s=3.0)
    return dataclasses.replace(base, **overrides)


class RoundClock:
    """The current round as the chain would report it; tests move it by hand."""

    def __init__(self, value: int = 5) -> None:
        self.value = value

    def __call__(self) -> int:
        return self.value


def announcement(i: int, n: int = 0, multiaddr: str = "/ip4/127.0.0.1/tcp/1") -> UpdateAnnounced:
    return UpdateAnnounced(
        miner=to_hex(account(i)),
        update_hash=to_hex(blake3.blake3(b"update-%d-%d" % (i, n)).digest()),
        trace_root=to_hex(blake3.blake3(b"trace-%d-%d" % (i, n)).digest()),
        size=1234,
        multiaddr=multiaddr,
    )


@dataclasses.dataclass
class Cluster:
    nodes: list[P2PNode]
    stores: list[DirectoryBlobSource]
    checkpoints: list[MemoryCheckpointSource]
    registries: list[RegistryView]
    clock: RoundClock
    segments: list[DirectoryStageSegments]

    def register_all(self, indices: range | list[int] | None = None, dial: bool = True) -> None:
        """Every node learns the entries of `indices` (default: all nodes); with `dial`, the
        entries carry real listen addresses, so the nodes' dialers connect them."""
        idx = list(range(len(self.nodes))) if indices is None else list(indices)
        for reg in self.registries:
            for i in idx:
                reg.upsert(entry_for(i, self.nodes[i].listen_addr if dial else ""))


@asynccontextmanager
async def cluster(
    tmp_path: Path, n: int, *, register: bool = True, dial: bool = True, **config: Any
) -> AsyncIterator[Cluster]:
    """`n` running nodes on 127.0.0.1, each with its own registry view of all of them."""
    clock = RoundClock()
    regs = [RegistryView(CHAIN_ID, CONTRACT) for _ in range(n)]
    stores = [DirectoryBlobSource(tmp_path / f"store{i}") for i in range(n)]
    ckpts = [MemoryCheckpointSource() for _ in range(n)]
    segments = [DirectoryStageSegments(tmp_path / f"segments{i}") for i in range(n)]
    cfg = p2p_config(**config)
    nodes = [
        P2PNode(identity(i), cfg, regs[i], stores[i], ckpts[i], current_round=clock, segments=segments[i])
        for i in range(n)
    ]
    async with AsyncExitStack() as stack:
        for node in nodes:
            await stack.enter_async_context(node.run())
        c = Cluster(nodes, stores, ckpts, regs, clock, segments)
        if register:
            c.register_all(dial=dial)
        yield c


def forge_pubsub_message(signer: NodeIdentity, topic: str, data: bytes, seqno: int) -> Any:
    """A StrictSign pubsub message as `signer` would publish it (to replay or inject)."""
    from libp2p.peer.id import ID
    from libp2p.pubsub.pb import rpc_pb2
    from libp2p.pubsub.validators import PUBSUB_SIGNING_PREFIX

    from protocol.p2p.host import key_pair_from_seed

    kp = key_pair_from_seed(signer.seed)
    msg = rpc_pb2.Message(
        data=data,
        topicIDs=[topic],
        from_id=ID.from_pubkey(kp.public_key).to_bytes(),
        seqno=seqno.to_bytes(8, "big"),
    )
    msg.signature = kp.private_key.sign(PUBSUB_SIGNING_PREFIX.encode() + msg.SerializeToString())
    msg.key = kp.public_key.serialize()
    return msg


async def send_raw(sender: P2PNode, receiver: P2PNode, msg: Any, timeout_s: float = 10.0) -> None:
    """Send a raw pubsub message from `sender` straight to `receiver`, as a modified client
    would: no validator, seen cache or IDONTWANT of `sender`'s own in the way. Waits for
    `sender`'s pubsub stream to `receiver` first."""
    from libp2p.pubsub.pb import rpc_pb2

    pubsub = sender.gossip.pubsub
    with trio.fail_after(timeout_s):
        while receiver.peer_id not in pubsub.peer_queues:
            await trio.sleep(0.02)
    sender.gossip.router.send_rpc(receiver.peer_id, rpc_pb2.RPC(publish=[msg]))


async def wait_for_mesh(node: P2PNode, peers: list[P2PNode], timeout_s: float = 10.0) -> None:
    """Until every one of `peers` is in `node`'s gossipsub mesh for the deployment topic
    (grafted, so `node` forwards to it), or AssertionError after `timeout_s`."""
    want = {p.peer_id for p in peers}

    def mesh() -> set[Any]:
        return set(node.gossip.router.mesh.get(node.gossip.topic, ()))

    with trio.move_on_after(timeout_s) as scope:
        while not want <= mesh():
            await trio.sleep(0.02)
    if scope.cancelled_caught:
        raise AssertionError(f"{len(want - mesh())} of {len(want)} peers not grafted after {timeout_s} s")


class HandledLog:
    """Which pubsub messages `node` has finished handling (dropped as seen, rejected by the
    validator, or delivered to the application's channel and forwarded).

    Wraps the node's `Pubsub.push_msg`, which pubsub runs once per incoming message."""

    def __init__(self, node: P2PNode) -> None:
        self.handled: set[tuple[bytes, bytes]] = set()
        self._changed = trio.Event()
        pubsub = node.gossip.pubsub
        push_msg = pubsub.push_msg

        async def recording_push_msg(forwarder: Any, msg: Any) -> None:
            try:
                await push_msg(forwarder, msg)
            finally:
                self.handled.add((msg.from_id, msg.seqno))
                self._changed.set()
                self._changed = trio.Event()

        pubsub.push_msg = recording_push_msg

    async def wait_for(self, msgs: list[Any], timeout_s: float = 10.0) -> None:
        want = {(m.from_id, m.seqno) for m in msgs}
        with trio.move_on_after(timeout_s) as scope:
            while not want <= self.handled:
                await self._changed.wait()
        if scope.cancelled_caught:
            raise AssertionError(f"{len(want - self.handled)} of {len(want)} messages never handled")


def noise_gate(node: P2PNode) -> Any:
    """The node's Noise transport, which is also its admission gate (`refused` counts)."""
    from protocol.p2p.bufconn import BufferedNoiseTransport

    upgrader = node.host.get_network().upgrader  # type: ignore[attr-defined]
    transports = upgrader.security_multistream.transports.values()
    return next(t for t in transports if isinstance(t, BufferedNoiseTransport))


def admit_all(_peer: Any) -> bool:
    """An admission rule that lets every peer in: for tests of the transport alone."""
    return True
