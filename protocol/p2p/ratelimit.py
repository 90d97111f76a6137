"""Per-peer token buckets whose rates grow with the peer's stake and reputation.

`limits_for` is a pure function of a registry entry and a policy; `PeerLimiter` holds the
mutable buckets, keyed by node key, with an injectable clock so tests need no sleeping.
Unregistered peers get no limits at all: the caller refuses them before asking.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from protocol.p2p.registry import MAX_REPUTATION, RegistryEntry


@dataclass(frozen=True)
class RatePolicy:
    """Base budgets for a peer with minimal stake and median reputation."""

    base_requests_per_s: float = 20.0  # blob/checkpoint requests
    base_bytes_per_s: float = 64 * 1024 * 1024  # served payload bytes
    base_gossip_per_s: float = 50.0  # gossip messages originated by the peer
    burst_seconds: float = 2.0  # bucket capacity = rate * burst_seconds
    stake_unit: int = 10**18  # stake that adds 1.0 to the stake factor
    max_stake_factor: float = 8.0  # cap so a whale cannot starve everyone else
    max_concurrent_streams: int = 4  # open blob streams per peer (file handles, memory)


@dataclass(frozen=True)
class RateLimits:
    requests_per_s: float
    bytes_per_s: float
    gossip_per_s: float
    burst_seconds: float
    max_concurrent_streams: int


def limits_for(entry: RegistryEntry, policy: RatePolicy) -> RateLimits:
    """Budgets for `entry`: base x stake factor (1..max) x reputation factor (0.5..1.5)."""
    stake_factor = min(1.0 + entry.stake / policy.stake_unit, policy.max_stake_factor)
    rep_factor = 0.5 + entry.reputation / MAX_REPUTATION
    mult = stake_factor * rep_factor
    return RateLimits(
        requests_per_s=policy.base_requests_per_s * mult,
        bytes_per_s=policy.base_bytes_per_s * mult,
        gossip_per_s=policy.base_gossip_per_s * mult,
        burst_seconds=policy.burst_seconds,
        max_concurrent_streams=policy.max_concurrent_streams,
    )


@dataclass
class TokenBucket:
    rate: float  # tokens per second
    capacity: float
    tokens: float
    stamp: float

    def _refill(self, now: float) -> None:
        self.tokens = min(self.capacity, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now

    def try_take(self, amount: float, now: float) -> bool:
        self._refill(now)
        if self.tokens >= amount:
            self.tokens -= amount
            return True
        return False

    def take_debt(self, amount: float, now: float) -> float:
        """Take `amount` even into debt; return seconds to wait until the debt is repaid."""
        self._refill(now)
        self.tokens -= amount
        return 0.0 if self.tokens >= 0 else -self.tokens / self.rate


@dataclass
class _PeerState:
    limits: RateLimits
    requests: TokenBucket
    bytes: TokenBucket
    gossip: TokenBucket
    streams: int = 0


def _ignore(_limit: str) -> None:
    pass


def _bucket(rate: float, burst: float, now: float) -> TokenBucket:
    cap = max(rate * burst, 1.0)
    return TokenBucket(rate=rate, capacity=cap, tokens=cap, stamp=now)


@dataclass
class PeerLimiter:
    """Mutable per-peer buckets. Re-derives limits when the entry's standing changes.
    `on_drop(limit)` hears of each refusal ("request", "gossip", "streams"): metrics."""

    policy: RatePolicy = field(default_factory=RatePolicy)
    clock: Callable[[], float] = time.monotonic
    on_drop: Callable[[str], None] = _ignore
    _peers: dict[bytes, _PeerState] = field(default_factory=dict)

    def _state(self, entry: RegistryEntry) -> _PeerState:
        limits = limits_for(entry, self.policy)
        state = self._peers.get(entry.node_key)
        if state is None or state.limits != limits:
            now = self.clock()
            burst = limits.burst_seconds
            streams = 0 if state is None else state.streams
            state = _PeerState(
                limits=limits,
                requests=_bucket(limits.requests_per_s, burst, now),
                bytes=_bucket(limits.bytes_per_s, burst, now),
                gossip=_bucket(limits.gossip_per_s, burst, now),
                streams=streams,
            )
            self._peers[entry.node_key] = state
        return state

    def allow_request(self, entry: RegistryEntry) -> bool:
        return self._counted(self._state(entry).requests.try_take(1.0, self.clock()), "request")

    def allow_gossip(self, entry: RegistryEntry) -> bool:
        return self._counted(self._state(entry).gossip.try_take(1.0, self.clock()), "gossip")

    def _counted(self, allowed: bool, limit: str) -> bool:
        if not allowed:
            self.on_drop(limit)
        return allowed

    def byte_delay(self, entry: RegistryEntry, nbytes: int) -> float:
        """Charge `nbytes` to the peer; seconds the sender should wait before sending more."""
        return self._state(entry).bytes.take_debt(float(nbytes), self.clock())

    def open_stream(self, entry: RegistryEntry) -> bool:
        state = self._state(entry)
        if state.streams >= state.limits.max_concurrent_streams:
            self.on_drop("streams")
            return False
        state.streams += 1
        return True

    def close_stream(self, entry: RegistryEntry) -> None:
        state = self._peers.get(entry.node_key)
        if state is not None and state.streams > 0:
            state.streams -= 1
