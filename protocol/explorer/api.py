"""The explorer's JSON API: a path to a view, one cached answer per view and block, and every
failure as a status code with a one-line message.

    /api/head                  {"block", "time", "chain_id"}: what the page polls
    /api/summary|rounds|disputes|nodes|votes
    /api/round/N, /api/node/ADDRESS

A view answers `{"view", "block", "data"}`, `data` being what `veritrain inspect VIEW --json`
prints under "data" (the same functions, the same JSON encoding). A failure answers
`{"error", "status"}`: 404 for a path, round or address that does not exist, 502 when reading
the chain fails, 504 when it does not answer in time.
"""

from __future__ import annotations

import json
import logging
import re
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

from protocol.chain.client import ChainClient
from protocol.explorer.views import ITEMS, LISTS, NotFound

log = logging.getLogger("veritrain.explorer")

REQUEST_TIMEOUT_S = 45.0  # a view makes many calls, each bounded by the RPC timeout; past this the page gets a 504
CACHE_ENTRIES = 256  # answers kept: the lists plus the rounds and accounts the page opened


@dataclass(frozen=True)
class Reply:
    status: int
    body: bytes
    content_type: str = "application/json"


def error_reply(status: int, message: str) -> Reply:
    return Reply(status, json.dumps({"error": message, "status": status}).encode())


def one_line(exc: BaseException) -> str:
    """`Type: reason` on one line; for a refused or dropped connection, just the OS reason
    (requests buries it in a long repr of its retry pool)."""
    text = " ".join(str(exc).split())
    errno = re.search(r"\[Errno -?\d+\] [^'\")]+", text)
    detail = errno.group(0).strip() if errno else text[:200]
    return f"{type(exc).__name__}: {detail}" if detail else type(exc).__name__


class ExplorerApi:
    """Answers API paths from one read-only chain client. Chain reads run one at a time on a
    worker thread, because the client (and the embedded EVM) is not meant for concurrent use,
    and each answer is cached until the next block."""

    def __init__(self, client: ChainClient, source: str, timeout_s: float = REQUEST_TIMEOUT_S) -> None:
        self.client, self.source, self.timeout_s = client, source, timeout_s
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="explorer-chain")
        self._cache: OrderedDict[tuple[str, str], tuple[int, bytes]] = OrderedDict()
        self._last_failure: str | None = None  # the worker's latest 502, logged once

    def get(self, path: str) -> Reply:
        """The reply to GET `path` (any path: a non-API one is a 404)."""
        try:
            work = self._route(path)
        except NotFound as exc:
            return error_reply(404, str(exc))
        try:
            future = self._pool.submit(self._answer, work)
        except RuntimeError:  # the pool is shut down: the server is stopping
            return error_reply(503, "the explorer is stopping")
        try:
            return future.result(timeout=self.timeout_s)
        except FutureTimeout:
            return error_reply(504, f"the chain at {self.source} did not answer within {self.timeout_s:g} s")

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _route(self, path: str) -> Callable[[], bytes]:
        parts = unquote(urlsplit(path).path).strip("/").split("/")
        if parts[0] != "api" or len(parts) not in (2, 3):
            raise NotFound(f"no such page: {path}")
        name, arg = parts[1], (parts[2] if len(parts) == 3 else None)
        if name == "head" and arg is None:
            return self._head
        if arg is None and name in LISTS:
            build = LISTS[name]
            return lambda: self._view(name, "", lambda: build(self.client))
        if arg is not None and name in ITEMS:
            item = ITEMS[name]
            return lambda: self._view(name, arg, lambda: item(self.client, arg))
        raise NotFound(f"no such page: {path}")

    def _answer(self, work: Callable[[], bytes]) -> Reply:
        """Runs on the worker: the view's JSON, or the failure as a status code."""
        try:
            body = work()
        except NotFound as exc:
            return error_reply(404, str(exc))
        except Exception as exc:  # this request's supervisor: any failure to read the chain is a 502, never a dead server
            message = f"reading the chain at {self.source} failed: {one_line(exc)}"
            if message != self._last_failure:  # once per outage, not once per poll
                log.warning("%s", message)
            self._last_failure = message
            return error_reply(502, message)
        if self._last_failure is not None:
            log.warning("reading the chain at %s again", self.source)
            self._last_failure = None
        return Reply(200, body)

    def _head(self) -> bytes:
        block = self.client.w3.eth.get_block("latest")
        return json.dumps({"block": int(block["number"]), "time": int(block["timestamp"]),
                           "chain_id": self.client.deployment.chain_id}).encode()

    def _view(self, name: str, arg: str, build: Callable[[], Any]) -> bytes:
        block = int(self.client.w3.eth.block_number)
        key = (name, arg)
        hit = self._cache.get(key)  # only the worker thread touches the cache
        if hit is not None and hit[0] == block:
            self._cache.move_to_end(key)
            return hit[1]
        # encoded as `inspect --json` encodes it: the same keys, integers exact
        body = json.dumps({"view": name, "block": block, "data": build()}, sort_keys=True, default=str).encode()
        self._cache[key] = (block, body)
        self._cache.move_to_end(key)
        while len(self._cache) > CACHE_ENTRIES:
            self._cache.popitem(last=False)
        return body
