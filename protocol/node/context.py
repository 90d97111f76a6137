"""What miners and validators share: keys, data dir, chain port, p2p node, worker, and
the global state of each round (computed deterministically, checked against the chain)."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio

from protocol.chain.client import ChainClient, reveals_from
from protocol.chain.events import EventLog
from protocol.chain.settlement_history import SettlementHistory
from protocol.config.run_setup import Setup, load_dataset, resolve
from protocol.core.errors import VeritrainError
from protocol.core.hardware.replay_profile import ReplayProfile
from protocol.core.proof.commitment import Commit
from protocol.core.proof.witness import NO_WITNESS
from protocol.core.proof.witness_bundle import SIG_BYTES, WitnessBundleError, decode_bundle
from protocol.core.settlement.result import compute_result
from protocol.core.train.training import ComputeConfig, StepCountError
from protocol.core.wire.blob_caps import BlobCaps, BlobKind, blob_caps
from protocol.core.wire.messages import SignedGossip
from protocol.node.chain_port import ChainPort
from protocol.node.class_book import ClassBook
from protocol.node.global_model import genesis_blob, next_state, select_updates
from protocol.node.keys import NodeKeys
from protocol.node.logs import kv
from protocol.node.metrics import NodeMetrics
from protocol.node.registry_sync import RegistrySync
from protocol.node.startup_steps import StartupSteps
from protocol.node.store import DataDir
from protocol.node.worker_pool import AsyncWorker, ProfileWorker
from protocol.p2p.config import P2PConfig
from protocol.p2p.errors import P2PError
from protocol.p2p.node import P2PNode
from protocol.p2p.registry import RegistryView

ZERO32 = b"\x00" * 32
METRICS_POLL_S = 2.0  # how often a served node reads round, phase and peers for its gauges
STATE_PATIENCE_S = 60.0  # how long a node whose own state disagrees with the chain keeps asking peers


class StateMismatch(VeritrainError):
    """Raised when this node's aggregation of a round disagrees with the attested model hash."""


@dataclass(frozen=True)
class NodeConfig:
    data_dir: Path
    listen: str = "/ip4/127.0.0.1/tcp/0"  # libp2p listen address (port 0: any free port)
    bootstrap: tuple[str, ...] = ()  # extra /ip4/../tcp/N/p2p/ID peers to keep connected
    poll_s: float = 0.5  # how often round/phase are read from chain
    fetch_timeout_s: float = 20.0  # per blob or checkpoint, across all peers tried
    top_g: int = 16  # updates aggregated per round (top-G by consensus)
    max_rounds: int | None = None  # stop after this many rounds (devnet, tests)
    capacity_margin: float = 0.5  # a miner trains as many steps as fit in this share of the commit window left
    slowdown: float = 1.0  # tests and devnet only: a miner this many times slower (it sleeps after each step)
    discover: str | None = None  # a domain whose DNS-AID records add dial hints (None: registry only)
    discover_server: tuple[str, int] | None = None  # name server to ask (None: the system resolver)
    hardware_class: ReplayProfile | None = None  # the permitted class this node runs (None: the run's profile)
    extra: dict[str, Any] = field(default_factory=dict)


class NodeContext:
    def __init__(self, client: ChainClient, keys: NodeKeys, config: NodeConfig, log: logging.Logger,
                 metrics: NodeMetrics | None = None) -> None:
        self.client, self.keys, self.config, self.log = client, keys, config, log
        self.metrics = metrics or NodeMetrics()  # kept either way; served only when asked (metrics_server.py)
        self.address: str = keys.account.address
        self.port = ChainPort(client, log, on_retry=self.metrics.chain_retry)
        self.classes = ClassBook(self.port, self.address)  # who checks which miner (hardware classes)
        self.data = DataDir(config.data_dir)
        self.setup: Setup = resolve(client.deployment.run_config)
        if config.hardware_class is not None:
            self.setup = self.setup.in_class(config.hardware_class)
        staking = bytes.fromhex(client.staking.address[2:])
        self.registry = RegistryView(client.handle.chain_id, staking)
        self.history = SettlementHistory(client)  # every round's result, rebuilt from chain data
        self.sync = RegistrySync(self.port, self.registry, log, self.history.known_reputation)
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
        self._bundles: dict[tuple[int, str], list[tuple[bytes, bytes]]] = {}

    def _blob_caps(self) -> BlobCaps:
        """The deployment's per-kind caps (older files: the ones the run config implies)."""
        implied = blob_caps(self.setup.model, self.setup.compute)
        recorded = self.client.deployment.blob_caps
        if recorded is None:
            return implied
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
        finally:
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(worker.close)

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

    # ---- chain helpers ----------------------------------------------------------------
    async def chain_time(self) -> int:
        return await self.port(self.client.block_time, "latest")

    async def next_block_time(self) -> int:
        """When the next block will most likely be stamped. Chains that mine on demand
        (anvil) leave the latest timestamp behind while idle but stamp new blocks now, and
        a dev chain whose clock was moved ahead stamps them ahead of this machine's clock:
        the pending block says which, where the node serves one."""
        pending = await self.port(self.client.block_time, "pending")  # never before the latest block
        return max(pending or await self.chain_time(), int(time.time()))

    def startup_step(self, what: str, **fields: Any) -> None:
        if self.startup is not None:
            self.startup.step(what, **fields)

    async def wait_first_round(self) -> None:
        """`wait_round_open(0)`, saying what the node waits for; start-up ends when it returns."""
        if not await self.port.view("rounds", "started"):
            self.startup_step("waiting for `veritrain start` (it opens round 0)")
        elif (current := await self.port(self.client.current_round)) > 0:
            self.startup_step("catching up: joining the current round", round=current)
        await self.wait_round_open(0)
        if self.startup is not None:
            self.startup.done()

    async def wait_round_open(self, round_: int) -> None:
        """Until `round_` is the current (or a past) round."""
        while True:
            if await self.port.view("rounds", "started") and await self.port(self.client.current_round) >= round_:
                self.current_round = await self.port(self.client.current_round)
                self.metrics.set_round(self.current_round)
                return
            await trio.sleep(self.config.poll_s)

    async def model_hash(self, round_: int) -> bytes:
        return bytes(await self.port.view("rounds", "model_hash", round_))

    async def commits(self, round_: int) -> dict[str, Commit]:
        """miner -> its commit (update hash, trace root, column, steps) for `round_`."""
        rows = await self.port(self.commit_log.rows)
        return {r["miner"]: Commit(bytes(r["update_hash"]), bytes(r["trace_root"]), int(r["index"]), int(r["steps"]))
                for r in rows if r["round"] == round_}

    def compute_for(self, commit: Commit) -> ComputeConfig:
        """The config `commit`'s trace, replay and challenges follow: the run's, with the miner's
        committed step count. StepCountError when the run does not allow that count."""
        return self.setup.compute.with_steps(commit.steps)

    def steps_allowed(self, commit: Commit) -> bool:
        """Whether `commit`'s step count is one the run allows (0 stands for H)."""
        return self.setup.compute.allows_steps(commit.steps)

    def challenge_compute(self, commit: Commit) -> ComputeConfig:
        """`compute_for`, or the run's own config when the committed step count is not allowed:
        challenges are drawn under it then, and the check fails as a derivation regardless."""
        try:
            return self.compute_for(commit)
        except StepCountError:
            return self.setup.compute

    async def columns(self, round_: int) -> list[str]:
        """The miners of `round_` in column (commit) order."""
        commits = await self.commits(round_)
        return sorted(commits, key=lambda m: commits[m].column)

    async def reveals(self, round_: int) -> dict[str, dict[str, Any]]:
        """Every validator's reveal of `round_` with its witness bundle: dict(miners, scores,
        witnesses, sigs, served), each list in column order. Reveals are read incrementally
        (audits and votes ask often); a bundle is fetched from the validator or any peer by its
        revealed content hash, and until it is, its witnesses read as NO_WITNESS (`served` False)."""
        columns = await self.columns(round_)
        out = {}
        for v, rev in reveals_from(await self.port(self.reveal_log.rows), round_).items():
            bundle = await self._bundle(round_, v, rev["witness_root"], len(columns))
            entries = bundle or [(NO_WITNESS, bytes(SIG_BYTES))] * len(columns)
            out[v] = {"miners": columns, "scores": rev["scores"], "witnesses": [w for w, _ in entries],
                      "sigs": [g for _, g in entries], "served": bundle is not None,
                      "heldout_loss": rev["heldout_loss"]}
        return out

    async def _bundle(self, round_: int, validator: str, root: bytes, columns: int) -> list[tuple[bytes, bytes]] | None:
        if (round_, validator) in self._bundles:
            return self._bundles[(round_, validator)]
        data = await self.fetch_blob(root, BlobKind.WITNESS_BUNDLE, first=validator)  # checked against the root
        if data is None:
            return None
        try:
            entries = decode_bundle(data, columns)
        except WitnessBundleError as exc:
            self.log.warning("malformed witness bundle %s", kv(round=round_, validator=validator, reason=exc))
            entries = [(NO_WITNESS, bytes(SIG_BYTES))] * columns  # auditors report it as unwitnessed
        self._bundles[(round_, validator)] = entries
        return entries

    # ---- p2p helpers ------------------------------------------------------------------
    def node_key_of(self, account: str) -> bytes | None:
        entry = self.registry.lookup_by_account(bytes.fromhex(account[2:]))
        return None if entry is None else entry.node_key

    def peers_for(self, first: str | None = None) -> list[bytes]:
        """Node keys to ask for a blob: `first`'s, then every validator's, then everyone else's."""
        keys = [k for k in [self.node_key_of(first)] if k] if first else []
        entries = sorted(self.registry.entries(), key=lambda e: e.role != "validator")
        keys += [e.node_key for e in entries if e.node_key not in keys and e.node_key != self.keys.identity.public_key]
        return keys

    async def fetch_blob(self, blob_hash: bytes, kind: BlobKind, first: str | None = None) -> bytes | None:
        """A verified blob from the store, or from peers: refused over `kind`'s cap before a
        byte of it is taken, streamed into the store as it arrives, then read once."""
        if self.data.blobs.has(blob_hash):
            return self.data.blobs.read(blob_hash)
        peers = self.peers_for(first)
        if not peers:
            return None
        with trio.move_on_after(self.config.fetch_timeout_s):
            try:
                got = await self.p2p.fetch_blob_any(peers, blob_hash, self.data.blobs, self.caps.of(kind))
            except P2PError as exc:
                self.log.info("blob unavailable %s", kv(hash=blob_hash.hex()[:12], kind=kind.value,
                                                        reason=type(exc).__name__))
                return None
            return got if isinstance(got, bytes) else Path(got).read_bytes()  # hashed as it arrived
        self.log.info("blob fetch timed out %s", kv(hash=blob_hash.hex()[:12], kind=kind.value))
        return None

    # ---- global state -----------------------------------------------------------------
    async def state_for(self, round_: int) -> tuple[bytes, bytes]:
        """(encoded θ_round, its hash), equal to the attested hash of `round_`.

        A node that holds the previous state recomputes this one and checks it against the
        chain; one that does not (it joined late, or lost its data dir), or whose result
        disagrees, fetches the attested state from peers: it is a blob addressed by the
        model hash. Recomputing from genesis is the last resort."""
        want = await self.model_hash(round_)
        if want == ZERO32:
            raise StateMismatch(f"round {round_} has no attested model yet")
        if (held := self._held_state(round_, want)) is not None:
            return held, want
        # without the previous state, recomputing means replaying history: ask peers first
        can_compute = round_ == 0 or self._holds_state(round_ - 1)
        if can_compute:
            try:
                blob, got = await self._compute_state(round_)
            except StateMismatch as exc:
                self.log.warning("cannot recompute the global state %s", kv(round=round_, reason=exc))
                got = b""
            if got == want:
                return await self._keep_state(round_, want, blob), want
            if got:
                self.log.warning("computed model differs from the attested one %s",
                                 kv(round=round_, computed=got.hex()[:12], attested=want.hex()[:12]))
        # content-addressed: verified against `want`. A node whose own result differs (genesis on
        # a class whose RNG kernels give other bits) keeps asking: at a round's start its peers
        # may not have kept the state yet
        patience = STATE_PATIENCE_S if can_compute and got else 0.0
        fetched = await self._fetch_state(want, patience)
        if fetched is not None:
            self.log.info("global state fetched from peers %s", kv(round=round_, model=want.hex()[:12]))
            return await self._keep_state(round_, want, fetched), want
        if can_compute:
            raise StateMismatch(f"round {round_}: no peer serves the attested model {want.hex()[:16]}…")
        self.log.warning("no peer serves the global state; recomputing from history %s", kv(round=round_))
        blob, got = await self._compute_state(round_)
        if got != want:
            raise StateMismatch(f"round {round_}: computed model {got.hex()[:16]}… but chain attests {want.hex()[:16]}…")
        return await self._keep_state(round_, want, blob), want

    async def _fetch_state(self, want: bytes, patience_s: float) -> bytes | None:
        """The attested state from peers, asked for again every poll for up to `patience_s`."""
        deadline = trio.current_time() + patience_s
        while True:
            fetched = await self.fetch_blob(want, BlobKind.STATE)
            if fetched is not None or trio.current_time() >= deadline:
                return fetched
            await trio.sleep(self.config.poll_s)

    def _held_state(self, round_: int, want: bytes) -> bytes | None:
        rec = self.data.state.get(f"state:{round_}")
        if not rec or rec["hash"] != want.hex() or not self._holds_state(round_):
            return None
        return self.data.blobs.read(bytes.fromhex(rec["blob"]))

    def _holds_state(self, round_: int) -> bool:
        """Whether this node keeps some state for `round_` (checked against the chain on use)."""
        rec = self.data.state.get(f"state:{round_}")
        return bool(rec) and self.data.blobs.has(bytes.fromhex(rec["blob"]))

    async def _keep_state(self, round_: int, want: bytes, blob: bytes) -> bytes:
        self.data.state.set(f"state:{round_}", {"hash": want.hex(), "blob": (await self.put_blob(blob)).hex()})
        return blob

    async def put_blob(self, data: bytes) -> bytes:
        """Store a blob durably (hash, write, fsync) without blocking the event loop."""
        return await trio.to_thread.run_sync(self.data.blobs.put, data)

    async def _compute_state(self, round_: int) -> tuple[bytes, bytes]:
        if round_ == 0:
            return await self._work(genesis_blob, self.setup.spec)  # type: ignore[no-any-return]
        return await self.compute_next(round_ - 1)  # type: ignore[no-any-return]

    async def consensus(self, round_: int) -> dict[str, int] | None:
        """Each miner's consensus score in `round_`, computed from chain data (the revealed
        vectors, once the round's reports resolved); None without the reveal quorum or after a
        fallback, when the model stays as it was."""
        if await self.port.view("rounds", "finalized", round_) and await self.port(self.client.fallback, round_):
            return None
        inputs = await self.port(self.history.inputs, round_)
        result = compute_result(inputs)
        return dict(zip(inputs.miners, result.consensus, strict=True)) if result.quorum else None

    # ---- rounds that passed the node by (protocol/node/round_notes.py) ---------------------
    async def duties_in(self, round_: int) -> dict[str, bool]:
        """This node's duties in `round_` (in order) and whether each landed; roles override it."""
        return {}

    async def compute_next(self, round_: int) -> tuple[bytes, bytes]:
        """θ_{round+1} from round `round_`'s result: (blob, hash). Without the quorum (or
        after a fallback) it is θ_round itself."""
        state_blob, state_hash = await self.state_for(round_)
        consensus = await self.consensus(round_)
        if consensus is None:
            return state_blob, state_hash
        chosen = select_updates([(m, c, False) for m, c in consensus.items()], self.config.top_g)
        commits = await self.commits(round_)
        envelopes = []
        for miner in chosen:
            blob = await self.fetch_blob(commits[miner].update_hash, BlobKind.UPDATE, first=miner)
            if blob is None:
                raise StateMismatch(f"round {round_}: update of {miner} is unavailable from every peer")
            envelopes.append(blob)
        spec, seed = self.setup.spec, self.setup.run_seed
        blob, new_hash, _ = await self._work(next_state, spec, seed, state_blob, state_hash, envelopes,
                                             self.caps.update, False)
        return blob, new_hash

    async def _work(self, fn: Any, *args: Any) -> Any:
        assert self.worker is not None, "worker not started"
        return await self.worker(fn, *args)
