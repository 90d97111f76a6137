"""The libp2p host: stable ed25519 identity, Noise only, yamux only, plus a reconnecting dialer.

docs/ARCHITECTURE.md §6: a default py-libp2p host also accepts plaintext (and secio/TLS) and offers mplex;
we pass explicit `sec_opt`/`muxer_opt` so Noise + yamux are the only choices negotiated. Each
dial costs a fixed ~250 ms, so the dialer keeps connections open and only redials (with
exponential backoff) when one drops. Dials run concurrently, at most
`P2PConfig.max_concurrent_dials` at once, each under its own timeout, so unreachable
registrations cost a few timeouts in all rather than one each (docs/INTEROP.md §2a).
Only admitted peers (eligible registry entries) are dialled, and the Noise transport drops
any other peer right after the handshake (bufconn.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import multiaddr
import multiaddr.exceptions
import trio
from libp2p import new_host
from libp2p.abc import IHost
from libp2p.crypto.ed25519 import create_new_key_pair
from libp2p.crypto.keys import KeyPair
from libp2p.crypto.x25519 import create_new_key_pair as create_x25519_key_pair
from libp2p.custom_types import TProtocol
from libp2p.exceptions import BaseLibp2pError
from libp2p.peer.id import ID
from libp2p.peer.peerinfo import PeerInfo
from libp2p.security.noise.transport import PROTOCOL_ID as NOISE_PROTOCOL_ID
from libp2p.stream_muxer.yamux.yamux import PROTOCOL_ID as YAMUX_PROTOCOL_ID
from libp2p.stream_muxer.yamux.yamux import Yamux

from protocol.core.crypto.signing import NodeIdentity
from protocol.p2p import memory, yamux_tuning
from protocol.p2p.bufconn import BufferedNoiseTransport
from protocol.p2p.errors import PeerNotAdmitted, PeerRefused, PeerUnavailable, TransferTimeout
from protocol.p2p.libp2p_logs import route_libp2p_logs
from protocol.p2p.registry import peer_id_of

log = logging.getLogger(__name__)

# Errors a network operation on a live peer can raise; caught at the edges and turned typed.
NET_ERRORS: tuple[type[BaseException], ...] = (
    BaseLibp2pError,
    OSError,
    EOFError,
    trio.BrokenResourceError,
    trio.ClosedResourceError,
)


def key_pair_from_seed(seed: bytes) -> KeyPair:
    """The libp2p key pair of a node key seed: same seed, same peer id, across restarts."""
    return create_new_key_pair(seed)


def build_host(identity: NodeIdentity, *, admit: Callable[[ID], bool]) -> IHost:
    """A host that negotiates only /noise and only /yamux/1.0.0, and keeps a connection only
    to peers for which `admit(peer_id)` holds (checked right after the Noise handshake)."""
    yamux_tuning.apply()  # larger yamux DATA frames: see yamux_tuning.py
    memory.keep_freed_buffers()  # reuse transfer buffers: see memory.py
    route_libp2p_logs()  # py-libp2p's records through the node's handlers: see libp2p_logs.py
    kp = key_pair_from_seed(identity.seed)
    # The Noise static key is separate from the identity key and may be ephemeral; the
    # handshake payload signs it with the identity key, which is what peers authenticate.
    # Read-ahead under Noise: see bufconn.py (same wire, far fewer recv calls per message).
    noise = BufferedNoiseTransport(
        kp, noise_privkey=create_x25519_key_pair().private_key, admit=admit
    )
    host = new_host(
        key_pair=kp,
        sec_opt={TProtocol(NOISE_PROTOCOL_ID): noise},
        muxer_opt={TProtocol(YAMUX_PROTOCOL_ID): Yamux},
    )
    # The swarm's AutoConnector dials everyone in the peerstore (up to 200, including
    # unregistered peers learnt via identify) and has no off switch in ConnectionConfig;
    # our Dialer dials registry and bootstrap peers only.
    host.get_network().auto_connector.maybe_connect = _no_auto_connect  # type: ignore[attr-defined]
    return host


async def _no_auto_connect() -> None:
    return None


def split_multiaddr(addr: str) -> tuple[multiaddr.Multiaddr, ID | None]:
    """Split '/ip4/../tcp/N[/p2p/ID]' into the transport part and the optional peer id."""
    ma = multiaddr.Multiaddr(addr)
    pid = ma.get_peer_id()
    if pid is None:
        return ma, None
    return ma.decapsulate(multiaddr.Multiaddr(f"/p2p/{pid}")), ID.from_base58(pid)


@dataclass
class _Backoff:
    delay: float
    next_try: float


class Dialer:
    """Keeps connections to the wanted peers open; redials dropped ones with backoff.

    Background dials run concurrently through one `trio.CapacityLimiter`. Each pass starts
    only as many as there are free slots, peers never tried (or whose last dial worked)
    first, so a newly registered honest peer is not queued behind unreachable ones that keep
    failing.
    """

    def __init__(
        self,
        host: IHost,
        dial_timeout_s: float,
        min_backoff_s: float,
        max_backoff_s: float,
        *,
        max_concurrent: int,
        admit: Callable[[ID], bool],
    ) -> None:
        self.host = host
        self.dial_timeout_s = dial_timeout_s
        self.min_backoff_s = min_backoff_s
        self.max_backoff_s = max_backoff_s
        self.max_concurrent = max_concurrent
        self.admit = admit
        self.limiter = trio.CapacityLimiter(max_concurrent)
        self._backoff: dict[ID, _Backoff] = {}
        self._locks: dict[ID, trio.Lock] = {}
        self._inflight: set[ID] = set()

    def is_connected(self, peer_id: ID) -> bool:
        return bool(self.host.get_network().get_connections(peer_id))

    async def connect(
        self, peer_id: ID, addrs: Iterable[multiaddr.Multiaddr], *, redial_failed: bool = True
    ) -> None:
        """Connect unless already connected. Raises PeerRefused (not admitted: no dial is
        made), PeerUnavailable or TransferTimeout.

        With `redial_failed=False` (the fetch paths), a peer whose last dial failed is not
        dialled again here: PeerUnavailable at once. The background dialer owns its retries
        (with backoff), so a caller walking a list of peers pays no dial timeout per
        unreachable peer that was already tried."""
        if peer_id == self.host.get_id() or self.is_connected(peer_id):
            return
        if not self.admit(peer_id):
            raise PeerRefused(f"{peer_id} is not bound to an eligible account; not dialling")
        if not redial_failed and peer_id in self._backoff:
            raise PeerUnavailable(f"{peer_id} unreachable at its last dial; redialled in the background")
        lock = self._locks.setdefault(peer_id, trio.Lock())
        async with lock:  # one dial per peer at a time; later callers reuse it
            if self.is_connected(peer_id):
                return
            if not redial_failed and peer_id in self._backoff:  # the dial we waited for failed
                raise PeerUnavailable(f"{peer_id} unreachable at its last dial")
            try:
                with trio.fail_after(self.dial_timeout_s):
                    await self.host.connect(PeerInfo(peer_id, list(addrs)))
            except trio.TooSlowError as exc:
                self._failed(peer_id)
                raise TransferTimeout(f"dial {peer_id} timed out") from exc
            except NET_ERRORS as exc:
                self._failed(peer_id)
                if _caused_by(exc, PeerNotAdmitted):
                    raise PeerRefused(f"{peer_id} is not admitted: {exc}") from exc
                raise PeerUnavailable(f"dial {peer_id} failed: {exc}") from exc
            self._backoff.pop(peer_id, None)

    async def connect_limited(self, peer_id: ID, addrs: Iterable[multiaddr.Multiaddr]) -> None:
        """`connect`, holding one of the `max_concurrent` dial slots while it dials."""
        if peer_id == self.host.get_id() or self.is_connected(peer_id):
            return
        async with self.limiter:
            await self.connect(peer_id, addrs)

    def _failed(self, peer_id: ID) -> None:
        prev = self._backoff.get(peer_id)
        delay = self.min_backoff_s if prev is None else min(prev.delay * 2, self.max_backoff_s)
        self._backoff[peer_id] = _Backoff(delay, trio.current_time() + delay)

    def failures(self, peer_id: ID) -> float:
        """The current backoff delay of `peer_id` (0 when its last dial worked or none ran):
        orders dials so peers that keep failing go last."""
        b = self._backoff.get(peer_id)
        return 0.0 if b is None else b.delay

    def due(self, peer_id: ID) -> bool:
        b = self._backoff.get(peer_id)
        return b is None or trio.current_time() >= b.next_try

    def _dial_order(self, wanted: dict[ID, list[multiaddr.Multiaddr]]) -> list[ID]:
        """Due, unconnected, admitted peers not already being dialled: fewest failures first."""
        due = [
            p
            for p in wanted
            if p not in self._inflight
            and not self.is_connected(p)
            and self.due(p)
            and self.admit(p)
        ]
        return sorted(due, key=self.failures)

    async def _background_dial(self, peer_id: ID, addrs: list[multiaddr.Multiaddr]) -> None:
        try:
            await self.connect_limited(peer_id, addrs)
        except (PeerRefused, PeerUnavailable, TransferTimeout) as exc:
            log.debug("redial %s failed: %s", peer_id, exc)
        finally:
            self._inflight.discard(peer_id)

    async def maintain(
        self, wanted: Callable[[], dict[ID, list[multiaddr.Multiaddr]]], interval_s: float
    ) -> None:
        """Forever: dial every wanted, unconnected peer whose backoff has expired, at most
        `max_concurrent` at once, without waiting for slow dials before the next pass."""
        async with trio.open_nursery() as nursery:
            while True:
                peers = wanted()
                free = self.max_concurrent - len(self._inflight)
                for peer_id in self._dial_order(peers)[: max(free, 0)]:
                    self._inflight.add(peer_id)
                    nursery.start_soon(self._background_dial, peer_id, peers[peer_id])
                await trio.sleep(interval_s)


def _caused_by(exc: BaseException, kind: type[BaseException]) -> bool:
    """Whether `kind` is anywhere in `exc`'s cause chain or (py-libp2p) MultiError list."""
    seen: set[int] = set()
    todo: list[BaseException] = [exc]
    while todo:
        e = todo.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, kind):
            return True
        todo += [c for c in (e.__cause__, e.__context__) if c is not None]
        todo += [c for c in getattr(e, "errors", ()) if isinstance(c, BaseException)]
    return False


def wanted_from(
    registry_addrs: Iterable[tuple[bytes, str]], bootstrap: Iterable[str], self_id: ID
) -> dict[ID, list[multiaddr.Multiaddr]]:
    """Peer id -> addrs from registry (node key, multiaddr) pairs plus bootstrap strings."""
    out: dict[ID, list[multiaddr.Multiaddr]] = {}
    for node_key, addr in registry_addrs:
        try:
            ma, _ = split_multiaddr(addr)
        except (ValueError, multiaddr.exceptions.Error) as exc:  # bad on-chain data must
            # not stop the dialer
            log.warning("ignoring bad registry multiaddr %r: %s", addr, exc)
            continue
        out.setdefault(peer_id_of(node_key), []).append(ma)
    for addr in bootstrap:
        ma, pid = split_multiaddr(addr)
        if pid is not None:
            out.setdefault(pid, []).append(ma)
    out.pop(self_id, None)
    return out
