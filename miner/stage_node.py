"""A stage miner (docs/PROTOCOL.md §16.4): per round, it finds its seat in the round's pipelines,
trains its stage over the stage link with its pipeline's other stages, and commits its stage's
envelope and trace root like any miner's update.

    seat (from chain) → θ_r's slice and the pipeline's batches in the worker → the round over the
    link (`stage_round.py`) → the envelope kept (embargoed) and the segment bundles put aside
    → commit → after the commit phase, envelope and bundles served (`stage_segment` requests)

A pipeline commits the steps all of its stages finished: a neighbour silent past `stage_wait_s`
ends the round at the last whole segment (none finished: the node sits the round out).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import trio

from miner.node import MinerNode
from miner.stage_cheat import ForkingStage, LazyStage, StageCheat
from miner.stage_round import StageLinks, run_stage_round
from miner.stage_work import (
    StageClosing,
    StageRoundJob,
    StageWork,
    close_stage_round,
    open_stage_round,
)
from miner.stage_worker import stage_call, stage_nudge
from protocol.chain.client import Phase
from protocol.core.crypto.hashing import content_hash
from protocol.core.errors import ConfigError
from protocol.core.pipeline.round_pipelines import Seat, seat_of
from protocol.core.pipeline.stage_slots import StageSeat
from protocol.core.wire.blob_caps import BlobKind
from protocol.node.global_state import ZERO32, StateMismatch
from protocol.node.logs import kv
from protocol.node.stage_pipelines import round_pipelines
from protocol.node.staged_store import fetch_stage_hashes, held_stage_hashes
from protocol.node.throughput import throttle_pause
from protocol.p2p.host import split_multiaddr
from protocol.p2p.stage_inbox import StageInbox
from protocol.p2p.stage_link import StageSender
from protocol.p2p.stage_segments import DirectoryStageSegments


class StageMinerNode(MinerNode):
    def __init__(self, *args: Any, cheat: StageCheat | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.stage_cheat = cheat  # devnet and tests only; None for every production stage miner
        if self.config.stage is None or self.setup.stage_split is None:
            raise ConfigError("a stage miner needs a staged run ([training] stages >= 2) and its --stage")
        if not 0 <= self.config.stage < self.setup.spec.stages:
            raise ConfigError(f"--stage {self.config.stage}: the run has stages 0 to {self.setup.spec.stages - 1}")
        self.inbox = StageInbox(self.p2p.config, self.registry, self.p2p.limiter)
        self.inbox.mount(self.p2p.host)
        self.sender = StageSender(self.p2p.host, self.p2p.dialer, self.keys.identity, self.p2p.config)
        self.pending = DirectoryStageSegments(self.data.root / "stage-pending")  # until the commit phase closes
        self.segments = DirectoryStageSegments(self.data.root / "stage-segments")
        self.p2p.server.segments = self.segments

    async def main(self, nursery: trio.Nursery) -> None:
        await self._rounds()  # no capacity-scaled work: a pipeline trains the run's H steps

    async def _new_work(self, r: int) -> dict[str, Any] | None:
        pipelines = await round_pipelines(self, r)
        seat = seat_of(pipelines, self.address)
        if seat is None or seat.stage != self.config.stage:
            self.log.info("not drawn into a pipeline this round %s", kv(round=r, stage=self.config.stage,
                                                                       pipelines=len(pipelines)))
            return None
        try:
            stage_blob, stage_hash = await self._stage_state(r)
        except StateMismatch as exc:
            self.log.warning("cannot get the round's model, skipping the round %s", kv(round=r, reason=exc))
            return None
        stage_seat = StageSeat(r, seat.pipeline, seat.stage, self.setup.spec.stages)
        self.log.info("training stage %s", kv(round=r, pipeline=seat.pipeline, stage=seat.stage,
                                              members=",".join(m[:8] for m in seat.members)))
        work = await self._train_stage(stage_seat, seat, stage_blob, stage_hash)
        if work.steps == 0:
            self.log.warning("no whole segment finished, sitting the round out %s", kv(round=r))
            return None
        return await trio.to_thread.run_sync(self._keep_stage, r, work)

    async def _stage_state(self, r: int) -> tuple[bytes, bytes]:
        """θ_r's slice for this miner's stage, (blob, stage hash): the attested stage index, then
        this stage's blob alone, from the store or peers (PROTOCOL.md §16.2). When no peer serves
        it (round 0 before anyone made the genesis state, validators all gone) the node makes θ_r
        whole, as a whole-model miner does."""
        split, stage = self.setup.stage_split, self.config.stage
        assert split is not None and stage is not None
        want = await self.model_hash(r)
        if want == ZERO32:
            raise StateMismatch(f"round {r} has no attested model yet")
        hashes = await fetch_stage_hashes(self.fetch_blob, want, split)
        if hashes is not None and (blob := await self.fetch_blob(hashes[stage], BlobKind.STATE)) is not None:
            self.log.info("stage of the model fetched alone %s", kv(round=r, stage=stage, bytes=len(blob)))
            return blob, hashes[stage]
        self.log.info("no peer serves the round's stage, making the whole model %s", kv(round=r, stage=stage))
        await self.state_for(r)  # held from now on as its index and stage blobs
        hashes = held_stage_hashes(self.data.blobs, want, split)
        assert hashes is not None, "state_for keeps what it returns"
        return self.data.blobs.read(hashes[stage]), hashes[stage]

    async def _next_state_early(self, r: int) -> None:
        """Nothing: a stage miner never aggregates the whole next model; it fetches its stage of
        θ_{r+1} when round r + 1 opens (its validators made θ_{r+1} before attesting it)."""

    async def _train_stage(self, seat: StageSeat, placed: Seat, stage_blob: bytes, stage_hash: bytes) -> StageWork:
        job = StageRoundJob(self.setup.spec, self.setup.run_seed, seat, placed.members, stage_blob, stage_hash)
        shape = tuple(await self._work(open_stage_round, job))
        keys, addrs = self._members(placed.members)
        cfg, count = self.setup.compute, self.setup.spec.microbatches
        self.inbox.expect_neighbours(seat.round, seat.pipeline, seat.stage, keys, shape, cfg.inner_steps, count)
        links = StageLinks(self.inbox, self.sender, keys, addrs, self.config.stage_wait_s)

        started = [trio.current_time()]

        async def compute(method: str, *args: Any) -> Any:
            if method == "outcome":  # the round is over: close it where the driver lives
                return await self._work(close_stage_round, seat, self._closing(seat))
            out = await self._work(stage_call, seat, method, *args)
            cheat = self.stage_cheat
            if method == "finish" and isinstance(cheat, LazyStage) and cheat.nudges_after(args[0]):
                await self._work(stage_nudge, seat, cheat.scale)
            if method in ("forward", "backward") and out is not None and isinstance(cheat, ForkingStage):
                out = cheat.sends(args[0], out)
            if method == "finish":  # tests only: a slower machine (`slowdown`)
                await trio.sleep(throttle_pause(self.config.slowdown, trio.current_time() - started[0]))
                started[0] = trio.current_time()
            return out

        def on_step(step: int) -> None:
            if step % cfg.checkpoint_every == 0:
                self.log.info("stage segment done %s", kv(round=seat.round, stage=seat.stage, step=step))

        done = await run_stage_round(seat, cfg.inner_steps, count, shape, links, compute, on_step)
        if done.silent is not None:
            self.log.warning("pipeline stalled %s", kv(round=seat.round, silent_stage=done.silent.stage,
                                                       steps=done.steps))
        work: StageWork = done.outcome
        return work

    def _closing(self, seat: StageSeat) -> StageClosing:
        """What the worker needs to close the round: the binding and the senders' signatures."""
        signatures = {slot: signed.signature for slot, (_sender, signed) in self.inbox.evidence.items()
                      if slot.round == seat.round and slot.pipeline == seat.pipeline}
        return StageClosing(self.client.handle.chain_id, self.client.rounds.address, self.address, signatures,
                            str(self.pending.root))

    def _members(self, members: tuple[str, ...]) -> tuple[list[bytes], list[list[Any]]]:
        keys, addrs = [], []
        for account in members:
            entry = self.registry.lookup_by_account(bytes.fromhex(account[2:]))
            if entry is None:
                raise ConfigError(f"pipeline member {account} is not in the registry")
            keys.append(entry.node_key)
            addrs.append([split_multiaddr(entry.multiaddr)[0]] if entry.multiaddr else [])
        return keys, addrs

    def _keep_stage(self, r: int, work: StageWork) -> dict[str, Any]:
        """Keep the envelope (embargoed until the commit phase closes) before committing to it."""
        self.data.state.embargo(r, [content_hash(work.envelope)])
        update_hash = self.data.blobs.put(work.envelope)
        kept = {"update_hash": update_hash.hex(), "trace_root": work.trace_root.hex(), "size": len(work.envelope),
                "steps": work.steps, "stage": self.config.stage}
        self.data.state.record(r, "work", kept)
        return kept

    async def _prune(self, current: int) -> None:
        """Free the link's memory of earlier rounds, and the segment bundles of past rounds nobody
        can ask about any more: finalized and with no open report against this miner (voters fetch
        while one is open)."""
        await super()._prune(current)
        self.inbox.forget_before(current)  # every earlier round is closed: its bundles hold what counts
        for q in _held_rounds(self.segments.root):
            if q >= current or not await self.port(self.port.read.rounds.finalized, q):
                continue
            if await self.port(self.port.read.rewards.open_reports, q, self.address):
                continue
            await trio.to_thread.run_sync(self.segments.drop_round, q)
            self.log.info("pruned stage segments %s", kv(round=q))

    async def _lift_embargoes(self) -> None:
        """Serve the envelopes and segment bundles of every round whose commit phase has closed."""
        await super()._lift_embargoes()
        for q in _held_rounds(self.pending.root):
            if await self.port.phase(q) > Phase.COMMIT:
                _serve_round(self.pending.root / str(q), self.segments.root / str(q))


def _held_rounds(folder: Path) -> list[int]:
    return sorted(int(p.name) for p in folder.iterdir() if p.name.isdigit()) if folder.is_dir() else []


def _serve_round(pending: Path, served: Path) -> None:
    """Move a round's bundles to where they are served, trace root by trace root (a rename: no
    bundle is ever half there; a restart mid-move finishes it)."""
    served.mkdir(parents=True, exist_ok=True)
    for root in pending.iterdir():
        if not (served / root.name).exists():
            os.replace(root, served / root.name)
    shutil.rmtree(pending, ignore_errors=True)
