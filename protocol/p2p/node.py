"""P2PNode: one object a miner/validator holds for all its off-chain networking.

    node = P2PNode(identity, config, registry, blobs=store, current_round=lambda: r)
    async with node.run():
        await node.connect(other.p2p_addr)              # or rely on registry/bootstrap dialing
        await node.publish(round_, UpdateAnnounced(...))
        msg = await node.receive()                       # SignedGossip, validated + de-duplicated
        data = await node.fetch_blob(miner_node_key, update_hash, max_bytes=caps.update)
        bundle = await node.fetch_stage_segment(stage_node_key, r, stage_root, j, max_bytes=cap)
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import multiaddr
import trio
from libp2p.peer.id import ID
from libp2p.tools.anyio_service import background_trio_service

from protocol.core.crypto.signing import NodeIdentity
from protocol.core.wire.messages import Body, PartName, SignedGossip
from protocol.p2p.blob_client import BlobClient, Checkpoint, StoredCheckpoint
from protocol.p2p.blob_server import BlobServer
from protocol.p2p.blob_streams import PROTOCOL
from protocol.p2p.config import P2PConfig
from protocol.p2p.errors import PeerUnavailable, TransferTimeout
from protocol.p2p.gossip import Gossip
from protocol.p2p.host import Dialer, build_host, split_multiaddr, wanted_from
from protocol.p2p.ratelimit import PeerLimiter
from protocol.p2p.registry import RegistryView, peer_id_of
from protocol.p2p.sources import BlobSink, BlobSource, CheckpointSource
from protocol.p2p.stage_segments import StageSegmentSource
from protocol.p2p.traffic import NO_TRAFFIC, Traffic

log = logging.getLogger(__name__)


def _is_shutdown_race(exc: BaseException) -> bool:
    return isinstance(exc, RuntimeError) and str(exc) == "Nursery is closed to new arrivals"


def without_shutdown_races(exc: BaseException) -> BaseException | None:
    """`exc` less py-libp2p's closed-nursery errors (None if nothing else is left)."""
    if isinstance(exc, BaseExceptionGroup):
        return exc.split(_is_shutdown_race)[1]
    return None if _is_shutdown_race(exc) else exc


class P2PNode:
    def __init__(
        self,
        identity: NodeIdentity,
        config: P2PConfig,
        registry: RegistryView,
        blobs: BlobSource,
        checkpoints: CheckpointSource | None = None,
        current_round: Callable[[], int] = lambda: 0,
        traffic: Traffic = NO_TRAFFIC,
        segments: StageSegmentSource | None = None,
    ) -> None:
        """`traffic` hears of the bytes each protocol moves and of rate-limit refusals (the
        node's metrics; the p2p layer imports none of the node). `segments`: the stage segment
        bundles it serves (PROTOCOL.md §16.5); None serves none (status 1, not found)."""
        self.identity = identity
        self.config = config
        self.registry = registry
        # docs/INTEROP.md §2a: only peers bound to an eligible account keep a connection
        self.host = build_host(identity, admit=registry.admits)
        self.limiter = PeerLimiter(config.rate_policy, on_drop=traffic.rate_limited)
        self.dialer = Dialer(
            self.host,
            config.dial_timeout_s,
            config.reconnect_min_s,
            config.reconnect_max_s,
            max_concurrent=config.max_concurrent_dials,
            admit=registry.admits,
        )
        self.gossip = Gossip(
            self.host, identity, config, registry, self.limiter, current_round, traffic
        )
        self.server = BlobServer(config, registry, self.limiter, blobs, checkpoints, traffic, segments)
        self.client = BlobClient(self.host, self.dialer, config, traffic)
        self.host.set_stream_handler(PROTOCOL, self.server.handle)
        self._revoked: set[bytes] = set()
        self._revoked_event = trio.Event()
        registry.on_revoke(self._on_revoke)

    def _on_revoke(self, node_key: bytes) -> None:
        self._revoked.add(node_key)
        self._revoked_event.set()

    async def _drop_revoked(self) -> None:
        """Forever: close every connection to a peer that stopped being admitted."""
        while True:
            await self._revoked_event.wait()
            self._revoked_event = trio.Event()
            keys, self._revoked = self._revoked, set()
            for key in keys:
                peer = peer_id_of(key)
                if self.registry.admits(peer):
                    continue  # eligible again (or re-registered) before we got here
                log.info("dropping %s: no longer bound to an eligible account", peer)
                with trio.move_on_after(self.config.close_timeout_s):
                    await self.host.get_network().close_peer(peer)

    @property
    def peer_id(self) -> ID:
        return self.host.get_id()

    @property
    def p2p_addr(self) -> str:
        """The first listen address with /p2p/<peer id>; valid once `run()` has started."""
        return f"{self.host.get_addrs()[0]}"

    @property
    def listen_addr(self) -> str:
        """The first listen address without /p2p (what goes into the on-chain registry)."""
        return str(split_multiaddr(self.p2p_addr)[0])

    @asynccontextmanager
    async def run(self) -> AsyncIterator[P2PNode]:
        """Listen, start gossip and the reconnecting dialer; stop all of it on exit."""
        listen = multiaddr.Multiaddr(self.config.listen_addr)
        closing = False
        try:
            async with self.host.run([listen]):
                async with background_trio_service(self.gossip.pubsub):
                    async with background_trio_service(self.gossip.router):
                        await self.gossip.start()
                        async with trio.open_nursery() as nursery:
                            nursery.start_soon(
                                self.dialer.maintain, self._wanted, self.config.maintain_interval_s
                            )
                            nursery.start_soon(self._drop_revoked)
                            try:
                                yield self
                            finally:
                                closing = True
                                nursery.cancel_scope.cancel()
        except (RuntimeError, BaseExceptionGroup) as exc:
            # py-libp2p's pubsub schedules a task for a message that arrives while its
            # service is stopping, into a nursery that is already closed; at shutdown
            # that is noise, not a failure of this node
            rest = without_shutdown_races(exc) if closing else exc
            if rest is not None:
                raise rest from None
            log.debug("ignored a message that arrived during shutdown")

    def _wanted(self) -> dict[ID, list[multiaddr.Multiaddr]]:
        pairs = [
            (e.node_key, e.multiaddr)
            for e in self.registry.entries()
            if e.multiaddr and e.eligible
        ]
        return wanted_from(pairs, self.config.bootstrap, self.peer_id)

    def _addrs_of(self, node_key: bytes) -> tuple[ID, list[multiaddr.Multiaddr]]:
        entry = self.registry.lookup_by_node_key(node_key)
        addrs = [split_multiaddr(entry.multiaddr)[0]] if entry and entry.multiaddr else []
        return peer_id_of(node_key), addrs

    async def connect(self, addr: str) -> ID:
        """Dial a '/ip4/../tcp/N/p2p/ID' address (kept open and reused)."""
        ma, pid = split_multiaddr(addr)
        if pid is None:
            raise PeerUnavailable(f"{addr} has no /p2p/<peer id> part")
        await self.dialer.connect(pid, [ma])
        return pid

    async def publish(self, round_: int, body: Body) -> bytes:
        """Sign and gossip `body` for `round_`; returns the message id."""
        return await self.gossip.publish(round_, body)

    async def receive(self) -> SignedGossip:
        """The next validated, de-duplicated message from another node."""
        return await self.gossip.receive()

    async def wait_for_topic_peers(self, n: int, timeout_s: float = 10.0) -> None:
        """Block until `n` peers have announced the deployment topic (TransferTimeout if not)."""
        try:
            with trio.fail_after(timeout_s):
                while len(self.gossip.mesh_peers()) < n:
                    await trio.sleep(0.05)
        except trio.TooSlowError as exc:
            raise TransferTimeout(f"only {len(self.gossip.mesh_peers())} topic peers") from exc

    async def fetch_blob(
        self,
        node_key: bytes,
        blob_hash: bytes,
        store: BlobSink | None = None,
        max_bytes: int | None = None,
    ) -> bytes | Path:
        """The verified blob (its path, when fetched into `store`); FrameTooLarge over `max_bytes`."""
        peer_id, addrs = self._addrs_of(node_key)
        return await self.client.fetch_blob(peer_id, blob_hash, addrs, store, max_bytes)

    async def fetch_blob_any(
        self,
        node_keys: Sequence[bytes],
        blob_hash: bytes,
        store: BlobSink | None = None,
        max_bytes: int | None = None,
    ) -> bytes | Path:
        peers = [self._addrs_of(k) for k in node_keys]
        return await self.client.fetch_blob_any(peers, blob_hash, store, max_bytes)

    def connected_peers(self) -> set[ID]:
        """Peers with an open connection (every one of them passed the admission gate)."""
        return {p for p, conns in self.host.get_network().connections.items() if conns}

    async def fetch_checkpoint(
        self, node_key: bytes, round_: int, trace_root: bytes, index: int, max_bytes: int | None = None,
        part: PartName = "all",
    ) -> Checkpoint:
        peer_id, addrs = self._addrs_of(node_key)
        return await self.client.fetch_checkpoint(peer_id, round_, trace_root, index, addrs, max_bytes, part)

    async def fetch_checkpoint_into(
        self, node_key: bytes, round_: int, trace_root: bytes, index: int, store: BlobSink,
        max_bytes: int | None = None, part: PartName = "all",
    ) -> StoredCheckpoint:
        """The checkpoint (or `part` of it) streamed into `store` as it arrives (hash-checked), with its proof."""
        peer_id, addrs = self._addrs_of(node_key)
        return await self.client.fetch_checkpoint_into(
            peer_id, round_, trace_root, index, store, addrs, max_bytes, part
        )

    async def fetch_stage_segment(
        self, node_key: bytes, round_: int, trace_root: bytes, segment: int, max_bytes: int
    ) -> bytes:
        """The bundle `node_key` serves for `segment` of the stage with `trace_root` (the stage,
        or the sender of its tensors); BlobNotFound, FrameTooLarge over `max_bytes`, TransferTimeout."""
        peer_id, addrs = self._addrs_of(node_key)
        return await self.client.fetch_stage_segment(
            peer_id, round_, trace_root, segment, max_bytes, addrs
        )
