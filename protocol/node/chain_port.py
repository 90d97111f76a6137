"""Chain calls from trio: off the event loop, retried with backoff while the RPC is away."""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

import trio

from protocol.chain.client import ChainClient, Phase
from protocol.chain.reader import ChainReader
from protocol.core.errors import ChainError, ContractRevert
from protocol.node.logs import kv

T = TypeVar("T")
RETRY_MIN_S, RETRY_MAX_S = 0.5, 8.0  # backoff while the RPC endpoint is unreachable
RETRY_GIVE_UP_S = 300.0  # after this long without the chain a node stops with an error


class ChainPort:
    """A ChainClient used from trio: each call runs in a thread; transient RPC failures
    are retried with backoff and a log line (and `on_retry("error" | "unreachable")`, the
    node's metrics); reverts pass straight through."""

    def __init__(self, client: ChainClient, log: logging.Logger,
                 on_retry: Callable[[str], None] = lambda _reason: None) -> None:
        self.client = client
        self.log = log
        self.on_retry = on_retry

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
                self.on_retry("error")
            except (OSError, ConnectionError) as exc:  # requests' errors subclass OSError
                if time.monotonic() - started > RETRY_GIVE_UP_S:
                    raise ChainError(f"chain unreachable for {RETRY_GIVE_UP_S:.0f}s") from exc
                self.log.warning("chain unreachable, retrying %s", kv(in_s=delay, error=type(exc).__name__))
                self.on_retry("unreachable")
            await trio.sleep(delay)
            delay = min(RETRY_MAX_S, delay * 2)

    @property
    def read(self) -> ChainReader:
        """The client's typed getters, to call through the port: `await port(port.read.rounds.finalized, r)`."""
        return self.client.read

    async def phase(self, round_: int) -> Phase:
        return await self(self.client.phase, round_, "pending")  # what the next block will see

    async def try_send(self, fn: Callable[..., Any], *args: Any) -> bool:
        """Send a transaction another node may already have sent (close_commit, store_seed,
        finalize): a revert means someone else did it first."""
        try:
            await self(fn, *args)
            return True
        except ContractRevert as exc:
            self.log.info("not sent %s", kv(action=getattr(fn, "__name__", fn), reason=exc.reason))
            return False
