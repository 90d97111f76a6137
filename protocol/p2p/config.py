"""Frozen p2p config. Every default says why it is what it is."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from protocol.core.errors import ConfigError
from protocol.p2p.ratelimit import RatePolicy

CHUNK_SIZE = 1 << 20  # blob chunk payload; fixed by the wire format (docs/INTEROP.md)


@dataclass(frozen=True)
class P2PConfig:
    chain_id: int
    contract: bytes  # 20-byte deployment contract address; with chain_id names the topic
    listen_addr: str = "/ip4/127.0.0.1/tcp/0"  # port 0 = any free port
    bootstrap: tuple[str, ...] = ()  # extra multiaddrs (with /p2p/<id>) to keep connected
    # cap of a fetch that names none (tests, benchmarks); nodes name their blob kind's cap on
    # every fetch (protocol/core/wire/blob_caps.py, recorded in the deployment file)
    max_blob_size: int = 256 * 1024 * 1024
    spool_dir: Path | None = None  # temp files of large in-memory fetches (None: the system's temp dir)
    read_timeout_s: float = 10.0  # every single read; a frozen peer costs at most this
    close_timeout_s: float = 0.5  # closing/resetting a stream; the peer may be frozen
    transfer_timeout_s: float = 600.0  # a whole blob transfer, whatever the pacing
    dial_timeout_s: float = 5.0  # py-libp2p adds a fixed ~250 ms to every dial
    # dials in flight at once (background redials, and the fan-out of one multi-peer fetch):
    # unreachable registrations each hold a slot for at most dial_timeout_s, so 50 of them
    # cost about two timeouts, not fifty; a few dozen sockets and tasks are cheap
    max_concurrent_dials: int = 32
    reconnect_min_s: float = 0.5  # first retry after a failed dial
    reconnect_max_s: float = 30.0  # backoff cap
    maintain_interval_s: float = 1.0  # how often the dialer checks wanted peers
    max_inbound_streams: int = 64  # blob streams served at once, all peers together
    round_window: int = 1  # accept gossip for rounds current-window .. current+1
    seen_cache_size: int = 65536  # app-level de-duplication (msg ids, nonces)
    delivery_buffer: int = 4096  # validated messages waiting for the application
    gossip_heartbeat_s: int = 1  # docs/ARCHITECTURE.md §6: default 120 s makes meshes form far too slowly
    gossip_degree: int = 6  # meshsub D / D_low / D_high (spec defaults)
    gossip_degree_low: int = 4
    gossip_degree_high: int = 12
    rate_policy: RatePolicy = field(default_factory=RatePolicy)

    def __post_init__(self) -> None:
        if len(self.contract) != 20:
            raise ConfigError("contract must be a 20-byte address")
        if self.max_blob_size <= 0 or self.read_timeout_s <= 0:
            raise ConfigError("max_blob_size and read_timeout_s must be positive")
        if self.max_concurrent_dials < 1 or self.dial_timeout_s <= 0:
            raise ConfigError("max_concurrent_dials must be >= 1 and dial_timeout_s positive")
