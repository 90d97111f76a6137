"""Keeps a node's p2p registry view in step with the chain's `Registered` events."""

from __future__ import annotations

import logging
import math
import time
from typing import Any

import trio

from protocol.chain.events import read_events
from protocol.node.chain_port import ChainPort
from protocol.node.logs import kv
from protocol.p2p.errors import RegistryError
from protocol.p2p.registry import RegistryEntry, RegistryView


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
