"""The I/O shell shared by miner and validator nodes: chain calls off the trio thread
with retry, the profile worker, structured logs, and the registry kept in sync."""

from __future__ import annotations

import functools
import logging
import math
import time
from collections.abc import Callable
from typing import Any, TypeVar

import trio

from protocol.chain.client import ChainClient, Phase
from protocol.chain.events import read_events
from protocol.core.errors import ChainError, ContractRevert
from protocol.core.replay_profile import ProfileWorker
from protocol.p2p.errors import RegistryError
from protocol.p2p.registry import RegistryEntry, RegistryView

T = TypeVar("T")
RETRY_MIN_S, RETRY_MAX_S = 0.5, 8.0  # backoff while the RPC endpoint is unreachable
RETRY_GIVE_UP_S = 300.0  # after this long without the chain a node stops with an error


def get_logger(name: str) -> logging.Logger:
    return logging.getLogger(f"veritrain.{name}")


def quiet_noisy_loggers() -> None:
    """Libraries log at INFO what a node operator does not need; keep their warnings."""
    for noisy in ("libp2p", "multiaddr", "web3", "urllib3", "trio", "asyncio", "eth", "eth_tester", "py.warnings",
                  "protocol.p2p"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    # a dial to a peer that went away is routine (the p2p layer tries the next one)
    logging.getLogger("libp2p.transport.tcp").setLevel(logging.CRITICAL)


def kv(**fields: Any) -> str:
    """key=value pairs for structured log lines."""
    return " ".join(f"{k}={v}" for k, v in fields.items())


class ChainPort:
    """A ChainClient used from trio: each call runs in a thread; transient RPC failures
    are retried with backoff and a log line; reverts pass straight through."""

    def __init__(self, client: ChainClient, log: logging.Logger) -> None:
        self.client = client
        self.log = log

    async def __call__(self, fn: Callable[..., T], *args: Any) -> T:
        delay, started = RETRY_MIN_S, time.monotonic()
        while True:
            try:
                return await trio.to_thread.run_sync(functools.partial(fn, *args))
            except ContractRevert:
                raise
            except ChainError as exc:
                if time.monotonic() - started > RETRY_GIVE_UP_S:
                    raise
                self.log.warning("chain call failed, retrying %s", kv(in_s=delay, error=str(exc)[:120]))
            except (OSError, ConnectionError) as exc:  # requests' errors subclass OSError
                if time.monotonic() - started > RETRY_GIVE_UP_S:
                    raise ChainError(f"chain unreachable for {RETRY_GIVE_UP_S:.0f}s") from exc
                self.log.warning("chain unreachable, retrying %s", kv(in_s=delay, error=type(exc).__name__))
            await trio.sleep(delay)
            delay = min(RETRY_MAX_S, delay * 2)

    async def view(self, contract: str, fn: str, *args: Any) -> Any:
        return await self(self.client.call, contract, fn, *args)

    async def phase(self, round_: int) -> Phase:
        return await self(self.client.phase, round_)

    async def try_send(self, fn: Callable[..., Any], *args: Any) -> bool:
        """Send a transaction another node may already have sent (close_commit, store_seed,
        finalize): a revert means someone else did it first."""
        try:
            await self(fn, *args)
            return True
        except ContractRevert as exc:
            self.log.info("not sent %s", kv(action=getattr(fn, "__name__", fn), reason=exc.reason))
            return False


class AsyncWorker:
    """The profile worker, called from trio without blocking the event loop."""

    def __init__(self, worker: ProfileWorker) -> None:
        self.worker = worker
        self._lock = trio.Lock()  # one job at a time: the worker is one process

    async def __call__(self, fn: Callable[..., T], *args: Any) -> T:
        async with self._lock:
            return await trio.to_thread.run_sync(functools.partial(self.worker.call, fn, *args))


class RegistrySync:
    """Feeds the p2p registry view from `Registered` events plus current stake and reputation."""

    # stake and reputation only scale rate limits and rank peers: reading them for every
    # node on every refresh was most of a node's chain reads while idle
    WEIGHTS_EVERY_S = 15.0

    def __init__(self, port: ChainPort, view: RegistryView, log: logging.Logger) -> None:
        self.port, self.view, self.log = port, view, log
        self._next_block = port.client.deployment.deploy_block
        self._bindings: dict[str, dict[str, Any]] = {}
        self._weights_at = -math.inf

    async def refresh(self) -> None:
        """New registrations at once; stake and reputation of known nodes at most every
        WEIGHTS_EVERY_S (and whenever a registration arrives)."""
        client = self.port.client
        head = await self.port(lambda: int(client.w3.eth.block_number))
        fresh = False
        if head >= self._next_block:
            rows = await self.port(read_events, client, "staking", "Registered", self._next_block, head)
            for row in rows:
                self._bindings[row["account"]] = row
            fresh = bool(rows)
            self._next_block = head + 1
        if not fresh and time.monotonic() - self._weights_at < self.WEIGHTS_EVERY_S:
            return
        self._weights_at = time.monotonic()
        for account, row in self._bindings.items():
            stake = await self.port.view("staking", "staked", account)
            reputation = await self.port.view("rewards", "reputation", account)
            entry = RegistryEntry(bytes(row["node_key"]), bytes.fromhex(account[2:]),
                                  "miner" if row["role"] == 1 else "validator", int(stake), int(reputation),
                                  row["multiaddr"], bytes(row["binding_sig"]))
            current = self.view.lookup_by_node_key(entry.node_key)
            if current == entry:
                continue
            try:
                self.view.upsert(entry)
            except RegistryError as exc:
                self.log.warning("ignoring registry binding %s", kv(account=account, reason=exc))

    async def run_forever(self, every_s: float = 2.0) -> None:
        while True:
            await self.refresh()
            await trio.sleep(every_s)
