"""What miners and validators share: keys, data dir, chain port, p2p node and worker, started
and stopped together. The round's chain reads (`round_reads.py`), blobs from peers
(`peer_blobs.py`) and the global state of each round (`global_state.py`) are its mixins."""

from __future__ import annotations

import logging
from typing import Any

import trio

from protocol.chain.client import ChainClient
from protocol.chain.events import EventLog
from protocol.chain.settlement_history import SettlementHistory
from protocol.config.run_setup import Setup, resolve
from protocol.config.run_state import load_dataset
from protocol.core.wire.blob_caps import BlobCaps, blob_caps
from protocol.core.wire.messages import SignedGossip
from protocol.node.account_guard import AccountMoved
from protocol.node.chain_port import ChainPort
from protocol.node.class_book import ClassBook
from protocol.node.global_state import GlobalState
from protocol.node.keys import NodeKeys
from protocol.node.logs import kv
from protocol.node.metrics import NodeMetrics
from protocol.node.node_config import NodeConfig
from protocol.node.registry_sync import RegistrySync
from protocol.node.startup_steps import StartupSteps
from protocol.node.store import DataDir
from protocol.node.worker_pool import AsyncWorker, ProfileWorker
from protocol.p2p.config import P2PConfig
from protocol.p2p.node import P2PNode
from protocol.p2p.registry import RegistryView

METRICS_POLL_S = 2.0  # how often a served node reads round, phase and peers for its gauges


class NodeContext(GlobalState):
    def __init__(self, client: ChainClient, keys: NodeKeys, config: NodeConfig, log: logging.Logger,
                 metrics: NodeMetrics | None = None) -> None:
        self.client, self.keys, self.config, self.log = client, keys, config, log
        self.metrics = metrics or NodeMetrics()  # kept either way; served only when asked (metrics_server.py)
        self.address: str = keys.account.address
        self.port = ChainPort(client, log, on_retry=self.metrics.chain_retry)
        # who checks which miner (hardware classes, check committees)
        self.classes = ClassBook(self.port, self.address, client.deployment.run_config.chain.committee)
        self.data = DataDir(config.data_dir)
        self.setup: Setup = resolve(client.deployment.run_config)
        if config.hardware_class is not None:
            self.setup = self.setup.in_class(config.hardware_class)
        staking = bytes.fromhex(client.staking.address[2:])
        self.registry = RegistryView(client.handle.chain_id, staking)
        self.history = SettlementHistory(client)  # every round's result, rebuilt from chain data
        own = None if config.registered is None else (self.address, keys.identity.public_key, config.registered)
        self.sync = RegistrySync(self.port, self.registry, log, self.history.known_reputation, own, self._moved)
        self.moved: AccountMoved | None = None  # set when another node took this account over
        self._scope = trio.CancelScope()
        self.caps = self._blob_caps()  # what each kind of fetched blob may weigh
        p2p_cfg = P2PConfig(chain_id=client.handle.chain_id, contract=staking, listen_addr=config.listen,
                            bootstrap=config.bootstrap, spool_dir=self.data.blobs.root)
        self.current_round = 0
        self.p2p = P2PNode(keys.identity, p2p_cfg, self.registry, blobs=self.data, checkpoints=self.data,
                           current_round=lambda: self.current_round, traffic=self.metrics)
        self.worker: AsyncWorker | None = None
        self.prestarted_worker: ProfileWorker | None = None  # the devnet and the CLI start them early
        self.startup: StartupSteps | None = None  # the CLI's start-up report; the devnet has none
        self.commit_log = EventLog(client, "rounds", "UpdateCommitted")
        self.reveal_log = EventLog(client, "scores", "ScoresRevealed")
        self.opened_log = EventLog(client, "rounds", "RoundOpened")  # a staged run's formation block
        self.formed: dict[int, list[tuple[str, ...]]] = {}  # a staged run's pipelines, by round
        self._bundles: dict[tuple[int, str], list[tuple[bytes, bytes]]] = {}

    def _blob_caps(self) -> BlobCaps:
        """The deployment's per-kind caps (older files: the ones the run config implies)."""
        implied = blob_caps(self.setup.model, self.setup.compute)
        recorded = self.client.deployment.blob_caps
        if recorded is None:
            return implied
        if recorded.partial is None:  # written before the aggregation tree: the implied cap
            recorded = recorded.model_copy(update={"partial": implied.partial})
        if short := recorded.below(implied):
            self.log.warning("deployment caps are below what this run's blobs may weigh %s",
                             kv(kinds=",".join(short)))
        return recorded

    async def run(self) -> None:
        """Start the worker, the p2p host, registry sync and gossip reading, then the role's
        `main`; everything stops when `main` returns."""
        worker = self.prestarted_worker
        if worker is None or worker.profile != self.setup.profile:
            self.startup_step("starting the worker")
            worker = ProfileWorker(self.setup.profile)
        self.startup_step("loading data", source=self.setup.spec.dataset.source)
        worker.warm(load_dataset, self.setup.spec.dataset)  # while the node boots, not in round 0
        try:
            # spawning the worker (it imports torch) and stopping it take seconds: off the event
            # loop, which the devnet shares among all of its nodes; a stop signal abandons the wait
            await trio.to_thread.run_sync(worker.ready, abandon_on_cancel=True)  # type: ignore[call-arg]
            self.worker = AsyncWorker(worker)
            self.startup_step("connecting to peers", listen=self.config.listen)
            with self._scope:
                await self._serve()
        finally:
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(worker.close)

    async def _serve(self) -> None:
        async with self.p2p.run():
            async with trio.open_nursery() as nursery:
                await self.sync.refresh()
                nursery.start_soon(self.sync.run_forever)
                nursery.start_soon(self._drain_gossip)
                if self.config.discover:  # after the first refresh: hints are checked against it
                    nursery.start_soon(self._dial_dns_hints, self.config.discover)
                if self.metrics.exported:  # its chain reads only for a node someone scrapes
                    nursery.start_soon(self._watch_for_metrics)
                await self.main(nursery)
                nursery.cancel_scope.cancel()

    def _moved(self, there: str) -> None:
        """Another node registered this account (`--move`): this one no longer serves it."""
        self.moved = AccountMoved(f"account {self.address} was registered at {there} by another node "
                                  "(--move); this node stops serving it")
        self._scope.cancel()

    async def main(self, nursery: trio.Nursery) -> None:
        raise NotImplementedError

    async def _dial_dns_hints(self, domain: str) -> None:
        from protocol.node.dns_hints import dial_dns_hints  # dnspython only when asked for
        from protocol.p2p.dns_resolve import DiscoveryConfig

        await dial_dns_hints(self.p2p, self.registry, domain,
                             DiscoveryConfig(server=self.config.discover_server), self.log)

    async def _watch_for_metrics(self) -> None:
        """Forever: the round, its phase and the connected peers into the node's gauges."""
        while True:
            round_ = await self.port(self.client.current_round)
            self.metrics.set_round(round_)
            self.metrics.set_phase(await self.port.phase(round_))
            self.metrics.set_peers(len(self.p2p.connected_peers()))
            await trio.sleep(METRICS_POLL_S)

    async def _drain_gossip(self) -> None:
        # read promptly: py-libp2p drops messages when the subscription buffer fills
        while True:
            self.on_gossip(await self.p2p.receive())

    def on_gossip(self, message: SignedGossip) -> None:
        """A validated message from another node; roles that act on gossip override this."""

    def startup_step(self, what: str, **fields: Any) -> None:
        if self.startup is not None:
            self.startup.step(what, **fields)

    async def wait_first_round(self) -> None:
        """`wait_round_open(0)`, saying what the node waits for; start-up ends when it returns."""
        if not await self.port(self.client.started):
            self.startup_step("waiting for `veritrain start` (it opens round 0)")
        elif (current := await self.port(self.client.current_round)) > 0:
            self.startup_step("catching up: joining the current round", round=current)
        await self.wait_round_open(0)

    # ---- rounds that passed the node by (protocol/node/round_notes.py) ---------------------
    async def duties_in(self, round_: int) -> dict[str, bool]:
        """This node's duties in `round_` (in order) and whether each landed; roles override it."""
        return {}

