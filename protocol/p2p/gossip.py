"""Gossip: one meshsub topic per deployment, a strict topic validator, and app-level de-dup.

docs/ARCHITECTURE.md §6 pitfalls handled here:
- spam protection (10 msg/s, also applied to our own publishes) is off; per-sender budgets
  from `PeerLimiter` replace it, inside the validator;
- heartbeat 1 s, so meshes form in seconds;
- publishes are paced, because the per-peer outbound queue holds 32 RPCs and drops the rest;
- the 32-slot subscription buffer is swapped for our own larger channel, read by one task;
- messages are de-duplicated by (content-addressed) id before they reach the application.

Admission (docs/INTEROP.md §2a): a message whose originator (pubsub `from`) is not an
eligible registry entry is dropped before any signature is checked: `AdmittingPubsub` asks
the registry ahead of py-libp2p's StrictSign check, and the topic validator asks again (and
charges the sender's rate budget) before our own ed25519 check. Unregistered or unstaked
senders cost a dict lookup, never a signature verification. `signature_checks` counts our
ed25519 verifications (tests, metrics).
"""

from __future__ import annotations

import hashlib
import logging
from collections import OrderedDict
from collections.abc import Callable

import trio
from libp2p.abc import IHost, INetStream
from libp2p.peer.id import ID
from libp2p.pubsub.gossipsub import PROTOCOL_ID_V11, PROTOCOL_ID_V12, GossipSub
from libp2p.pubsub.pb import rpc_pb2
from libp2p.pubsub.pubsub import Pubsub
from libp2p.pubsub.rpc_queue import DefaultMaxMessageSize, RpcQueue

from protocol.core.crypto.signing import NodeIdentity
from protocol.core.wire.messages import (
    Body,
    FraudReported,
    MalformedMessage,
    MessageRejected,
    PartialAnnounced,
    ResultSigned,
    SignedGossip,
    TreeAudited,
    UpdateAnnounced,
    decode_gossip,
    from_hex,
    make_gossip,
    to_hex,
)
from protocol.p2p.config import P2PConfig
from protocol.p2p.ratelimit import PeerLimiter
from protocol.p2p.registry import RegistryEntry, RegistryView, peer_id_of
from protocol.p2p.traffic import NO_TRAFFIC, CountedStream, Traffic

log = logging.getLogger(__name__)

MSG_ID_DOMAIN = b"veritrain/msgid/v1\x00"
PUBLISH_INTERVAL_S = 0.002  # yield between publishes so the per-peer senders run
OUTBOUND_QUEUE_SIZE = 512  # RPCs per peer; go-libp2p's default of 32 drops bursts on a busy CPU
QUEUE_HIGH_WATER = OUTBOUND_QUEUE_SIZE // 4  # our publishes wait while a queue is this full

# py-libp2p builds each peer's RpcQueue with a default size bound at definition time and no
# option to change it (go-libp2p has WithPeerOutboundQueueSize); set the default here, the
# only place that imports pubsub.
RpcQueue.__init__.__defaults__ = (OUTBOUND_QUEUE_SIZE, DefaultMaxMessageSize)


def topic_for(chain_id: int, contract: bytes) -> str:
    """The deployment's single gossip topic."""
    return f"/veritrain/1/{chain_id}/0x{contract.hex()}"


def message_id(msg: rpc_pb2.Message) -> bytes:
    """Content-addressed id: sha256(domain || topics joined by '\\n' || 0x00 || data).

    Independent of sender and seqno, so implementations agree on IHAVE/IWANT and a message
    re-published with a new seqno is still one message.
    """
    topics = "\n".join(msg.topicIDs).encode()
    return hashlib.sha256(MSG_ID_DOMAIN + topics + b"\x00" + msg.data).digest()


def claimed_account(body: Body) -> str:
    """The account a message claims to come from."""
    if isinstance(body, UpdateAnnounced):
        return body.miner
    if isinstance(body, ResultSigned | PartialAnnounced | TreeAudited):
        return body.validator
    assert isinstance(body, FraudReported)
    return body.reporter


class _Lru:
    """Bounded insertion-ordered map, so no peer can grow our memory without limit."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._d: OrderedDict[bytes, bytes] = OrderedDict()

    def get(self, key: bytes) -> bytes | None:
        return self._d.get(key)

    def put(self, key: bytes, value: bytes = b"") -> None:
        self._d[key] = value
        self._d.move_to_end(key)
        while len(self._d) > self.size:
            self._d.popitem(last=False)

    def __contains__(self, key: bytes) -> bool:
        return key in self._d


class AdmittingPubsub(Pubsub):
    """py-libp2p's Pubsub, but a message from a sender that `admit` refuses is dropped before
    StrictSign (or anything else) looks at it. Our own publishes pass. Every RPC read or
    written (messages, forwards and control) is counted in `traffic`."""

    def __init__(
        self,
        *args: object,
        admit: Callable[[rpc_pb2.Message], bool],
        traffic: Traffic = NO_TRAFFIC,
        **kwargs: object,
    ) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.admit = admit
        self.traffic = traffic
        self.not_admitted = 0  # messages dropped at the gate, for tests and metrics

    async def continuously_read_stream(self, stream: INetStream) -> None:
        # pubsub reads every inbound RPC here, from the stream a peer opened to us
        protocol = str(stream.get_protocol() or PROTOCOL_ID_V12)
        await super().continuously_read_stream(CountedStream(stream, protocol, self.traffic))

    async def write_msg(self, stream: INetStream, rpc_msg: rpc_pb2.RPC) -> bool:
        # and writes every outbound one here (as one varint-prefixed write)
        written = await super().write_msg(stream, rpc_msg)
        if written:
            size = rpc_msg.ByteSize()
            self.traffic.bytes_out(str(stream.get_protocol() or PROTOCOL_ID_V12), size + _varint_len(size))
        return written

    async def push_msg(self, msg_forwarder: ID, msg: rpc_pb2.Message) -> None:
        if msg_forwarder != self.my_id and not self.admit(msg):
            self.not_admitted += 1
            log.info("gossip from %s dropped: originator not admitted", msg_forwarder)
            return
        await super().push_msg(msg_forwarder, msg)


def _varint_len(n: int) -> int:
    return max(1, (n.bit_length() + 6) // 7)


class GossipRules:
    """The checks every message passes before it is forwarded or delivered."""

    def __init__(
        self,
        config: P2PConfig,
        registry: RegistryView,
        limiter: PeerLimiter,
        current_round: Callable[[], int],
    ) -> None:
        self.config = config
        self.registry = registry
        self.limiter = limiter
        self.current_round = current_round
        self.nonces = _Lru(config.seen_cache_size)  # sender||nonce -> msg id
        self.signature_checks = 0  # ed25519 verifications run on gossip (tests, metrics)

    def origin_entry(self, msg: rpc_pb2.Message) -> RegistryEntry | None:
        """The eligible entry of a message's originator, or None. No signature is looked at."""
        try:
            origin = ID(msg.from_id)
        except (TypeError, ValueError):
            return None
        return self.registry.admitted_peer(origin)

    def decode(self, msg: rpc_pb2.Message) -> SignedGossip:
        """Parse and verify the signed gossip (the one ed25519 check), counting it."""
        self.signature_checks += 1
        return decode_gossip(msg.data)

    def check(self, signed: SignedGossip, origin: ID, msg_id: bytes) -> RegistryEntry:
        """Raise MessageRejected unless `signed` (originated by `origin`) is acceptable."""
        p = signed.payload
        if p.chain_id != self.config.chain_id or p.contract != to_hex(self.config.contract):
            raise MessageRejected("wrong deployment (chain id or contract)")
        now = self.current_round()
        if not now - self.config.round_window <= p.round <= now + 1:
            raise MessageRejected(f"round {p.round} outside window around {now}")
        entry = self.registry.admitted_key(signed.sender_key)
        if entry is None:
            raise MessageRejected("sender node key is not bound to an eligible account")
        if peer_id_of(signed.sender_key) != origin:
            raise MessageRejected("pubsub originator is not the signing node")
        if to_hex(entry.account) != claimed_account(p.body):
            raise MessageRejected("signed by a different node key than the claimed account's")
        seen = self.nonces.get(signed.sender_key + from_hex(p.nonce))
        if seen is not None and seen != msg_id:
            raise MessageRejected("nonce already used by another message (replay)")
        return entry

    def record(self, signed: SignedGossip, msg_id: bytes) -> None:
        self.nonces.put(signed.sender_key + from_hex(signed.payload.nonce), msg_id)


class Gossip:
    """Pubsub + GossipSub wired with our validator; `receive()` yields accepted messages."""

    def __init__(
        self,
        host: IHost,
        identity: NodeIdentity,
        config: P2PConfig,
        registry: RegistryView,
        limiter: PeerLimiter,
        current_round: Callable[[], int],
        traffic: Traffic = NO_TRAFFIC,
    ) -> None:
        self.host = host
        self.identity = identity
        self.config = config
        self.topic = topic_for(config.chain_id, config.contract)
        self.rules = GossipRules(config, registry, limiter, current_round)
        self.limiter = limiter
        self.router = GossipSub(
            protocols=[PROTOCOL_ID_V12, PROTOCOL_ID_V11],
            degree=config.gossip_degree,
            degree_low=config.gossip_degree_low,
            degree_high=config.gossip_degree_high,
            heartbeat_interval=config.gossip_heartbeat_s,
            spam_protection_enabled=False,
        )
        self.pubsub = AdmittingPubsub(
            host, self.router, msg_id_constructor=message_id, admit=self._admit, traffic=traffic
        )
        self._send, self._recv = trio.open_memory_channel[rpc_pb2.Message](config.delivery_buffer)
        self._delivered = _Lru(config.seen_cache_size)
        self._publish_lock = trio.Lock()
        self.rejected = 0  # counters for tests and metrics
        self.duplicates = 0

    @property
    def signature_checks(self) -> int:
        """Our ed25519 verifications of received gossip (py-libp2p's StrictSign check, run
        before ours, sees exactly the messages `AdmittingPubsub` let through)."""
        return self.rules.signature_checks

    def _admit(self, msg: rpc_pb2.Message) -> bool:
        return self.rules.origin_entry(msg) is not None

    def _validate(self, forwarder: ID, msg: rpc_pb2.Message) -> bool:
        try:
            # admission and the rate budget before any signature is checked
            origin = self.rules.origin_entry(msg)
            if origin is None:
                raise MessageRejected("originator is not bound to an eligible account")
            if forwarder != self.host.get_id() and not self.limiter.allow_gossip(origin):
                raise MessageRejected("sender over its gossip rate limit")
            signed = self.rules.decode(msg)
            self.rules.check(signed, ID(msg.from_id), message_id(msg))
        except (MalformedMessage, MessageRejected) as exc:
            self.rejected += 1
            log.info("gossip rejected (via %s): %s", forwarder, exc)
            return False
        return True

    async def start(self) -> None:
        """Subscribe and install the validator; call once the pubsub services run."""
        self.pubsub.set_topic_validator(self.topic, self._validate, False)
        await self.pubsub.wait_until_ready()
        await self.pubsub.subscribe(self.topic)
        # Replace the 32-slot buffer with ours; `notify_subscriptions` drops on overflow.
        self.pubsub.subscribed_topics_send[self.topic] = self._send

    def mesh_peers(self) -> set[ID]:
        return set(self.pubsub.peer_topics.get(self.topic, set()))

    async def publish(self, round_: int, body: Body) -> bytes:
        """Sign and publish; return the message id. Paced, see module docstring."""
        data = make_gossip(self.identity, self.config.chain_id, self.config.contract, round_, body)
        async with self._publish_lock:
            while any(len(q) > QUEUE_HIGH_WATER for q in self.pubsub.peer_queues.values()):
                await trio.sleep(PUBLISH_INTERVAL_S)  # back-pressure: senders are behind
            await self.pubsub.publish(self.topic, data)
            await trio.sleep(PUBLISH_INTERVAL_S)
        return message_id(rpc_pb2.Message(data=data, topicIDs=[self.topic]))

    async def receive(self) -> SignedGossip:
        """The next accepted message from another node, each delivered at most once."""
        while True:
            msg = await self._recv.receive()
            accepted = self._accept(msg)
            if accepted is not None:
                return accepted

    def _accept(self, msg: rpc_pb2.Message) -> SignedGossip | None:
        mid = message_id(msg)
        if mid in self._delivered:
            self.duplicates += 1
            return None
        if ID(msg.from_id) == self.host.get_id():
            return None  # our own publish, echoed by pubsub
        try:
            # Re-check: pubsub's validation cache (300 s) outlives its seen cache (120 s),
            # so an old replay could otherwise skip the round window check.
            if self.rules.origin_entry(msg) is None:
                raise MessageRejected("originator is no longer bound to an eligible account")
            signed = self.rules.decode(msg)
            self.rules.check(signed, ID(msg.from_id), mid)
        except (MalformedMessage, MessageRejected) as exc:
            self.rejected += 1
            log.info("gossip rejected at delivery: %s", exc)
            return None
        self._delivered.put(mid)
        self.rules.record(signed, mid)
        return signed
