"""Keeps a node's p2p registry view in step with the chain: `Registered` events for the
bindings, and the staking view for each entry's stake, reputation and eligibility.

Eligibility (docs/INTEROP.md §2a) is `staking.eligible_role(account) == role`: registered
and staked at least the role's minimum (a validator also still in the validator set), or, for
a validator, a permit in the current round (`rounds.validator_weight(round, account) > 0`): one
retired, evicted or unbonding mid-round still scores, reveals and signs that round, and the
others wait for it until it is cut off. The p2p layer admits only eligible entries, so an account whose stake changes (staked, unbond
requested, slashed, evicted from the validator set) is re-read at the next refresh, not at
the next periodic sweep: an honest node that just staked is admitted within one refresh,
and one that lost its stake is dropped within one.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from typing import Any

import trio

from protocol.chain.client import Role
from protocol.chain.events import read_many
from protocol.node.chain_port import ChainPort
from protocol.node.logs import kv
from protocol.p2p.errors import RegistryError
from protocol.p2p.registry import RegistryEntry, RegistryView

# every staking event that can change an account's eligibility (each carries `account`)
STANDING_EVENTS = ("Staked", "UnbondRequested", "Slashed", "ValidatorSetChanged", "ValidatorEvicted")


class RegistrySync:
    """Feeds the p2p registry view from `Registered` events plus current standing."""

    # stake and reputation only scale rate limits and rank peers: reading them for every
    # node on every refresh was most of a node's chain reads while idle. Accounts named by a
    # standing event are re-read at once (see the module docstring).
    WEIGHTS_EVERY_S = 15.0

    def __init__(self, port: ChainPort, view: RegistryView, log: logging.Logger,
                 reputation_of: Callable[[str], int] = lambda _account: 0,
                 own: tuple[str, bytes, str] | None = None,
                 on_moved: Callable[[str], None] = lambda _addr: None) -> None:
        self.port, self.view, self.log = port, view, log
        # (account, node key, address) this node registered; when the chain's latest binding of
        # the account is another, another node took the account over (`--move`): `on_moved(its address)`
        self.own, self.on_moved = own, on_moved
        self.reputation_of = reputation_of  # from the latest final result this node rebuilt
        self._next_block = port.client.deployment.deploy_block
        self._bindings: dict[str, dict[str, Any]] = {}
        self._refused: set[tuple[str, bytes, str, bytes]] = set()  # (account, node key, address, sig) warned about
        self._weights_at = -math.inf
        self._round: int | None = None  # the current round, read at each refresh (None: not started)

    async def refresh(self) -> None:
        """New registrations and accounts whose standing changed at once; every known node's
        standing at most every WEIGHTS_EVERY_S."""
        client = self.port.client
        head = await self.port(lambda: int(client.w3.eth.block_number))
        self._round = await self.port(lambda: client.current_round() if client.started() else None)
        dirty: set[str] = set()
        if head >= self._next_block:
            wanted = [("staking", "Registered"), *(("staking", e) for e in STANDING_EVENTS)]
            logs = await self.port(read_many, client, wanted, self._next_block, head)
            for row in logs[("staking", "Registered")]:
                self._bindings[row["account"]] = row
                dirty.add(row["account"])
            for event in STANDING_EVENTS:
                dirty.update(row["account"] for row in logs[("staking", event)])
            self._next_block = head + 1
            self._check_own()
        if time.monotonic() - self._weights_at >= self.WEIGHTS_EVERY_S:
            self._weights_at = time.monotonic()
            dirty = set(self._bindings)
        for account in dirty:
            binding = self._bindings.get(account)
            if binding is not None:  # standing events of unregistered accounts: nothing to do
                await self._apply(account, binding)

    def _check_own(self) -> None:
        if self.own is None or (latest := self._bindings.get(self.own[0])) is None:
            return
        if (bytes(latest["node_key"]), latest["multiaddr"]) != self.own[1:]:
            self.on_moved(latest["multiaddr"])

    async def _apply(self, account: str, row: dict[str, Any]) -> None:
        staking = self.port.read.staking
        stake = await self.port(staking.stake_of, account)
        reputation = self.reputation_of(account)
        eligible_role = await self.port(staking.eligible_role, account)
        role = int(row["role"])
        entry = RegistryEntry(bytes(row["node_key"]), bytes.fromhex(account[2:]),
                              "miner" if role == Role.MINER else "validator", stake, int(reputation),
                              row["multiaddr"], bytes(row["binding_sig"]),
                              eligible=eligible_role == role or await self._holds_permit(role, account))
        if self.view.lookup_by_node_key(entry.node_key) == entry:
            return
        try:
            self.view.upsert(entry)
        except RegistryError as exc:
            # every sweep retries it (a taken node key may be freed), but one junk registration
            # must not make every node warn every sweep forever: once per binding
            refused = (account, entry.node_key, entry.multiaddr, entry.binding_sig)
            if refused not in self._refused:
                self._refused.add(refused)
                self.log.warning("ignoring registry binding %s", kv(account=account, reason=exc))

    async def _holds_permit(self, role: int, account: str) -> bool:
        """Whether `account` is a validator holding a permit in the current round."""
        if role != Role.VALIDATOR or self._round is None:
            return False
        return await self.port(self.port.read.rounds.validator_weight, self._round, account) > 0

    async def run_forever(self, every_s: float = 2.0) -> None:
        while True:
            await self.refresh()
            await trio.sleep(every_s)
