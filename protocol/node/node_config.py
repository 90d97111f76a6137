"""A node's own settings (miner or validator): where it keeps its data, how it reaches peers,
how often it polls, and the test-only knobs. Node-local: none of them changes a consensus result."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from protocol.core.hardware.replay_profile import ReplayProfile


@dataclass(frozen=True)
class NodeConfig:
    data_dir: Path
    listen: str = "/ip4/127.0.0.1/tcp/0"  # libp2p listen address (port 0: any free port)
    # the address this node registered on chain (the CLI sets it): the node stops when the chain's
    # binding of its account changes to another node's (a `--move`). None: not watched (the devnet)
    registered: str | None = None
    bootstrap: tuple[str, ...] = ()  # extra /ip4/../tcp/N/p2p/ID peers to keep connected
    poll_s: float = 0.5  # how often round/phase are read from chain
    fetch_timeout_s: float = 20.0  # per blob or checkpoint, across all peers tried
    max_rounds: int | None = None  # stop after this many rounds (devnet, tests)
    capacity_margin: float = 0.5  # a miner trains as many steps as fit in this share of the commit window left
    slowdown: float = 1.0  # tests and devnet only: a miner this many times slower (it sleeps after each step)
    discover: str | None = None  # a domain whose DNS-AID records add dial hints (None: registry only)
    discover_server: tuple[str, int] | None = None  # name server to ask (None: the system resolver)
    hardware_class: ReplayProfile | None = None  # the permitted class this node runs (None: the run's profile)
    stage: int | None = None  # a staged run's miner: the stage it trains (PROTOCOL.md §16); None: the whole model
    stage_wait_s: float = 60.0  # how long a stage miner waits for one boundary tensor before it ends its round
    extra: dict[str, Any] = field(default_factory=dict)
