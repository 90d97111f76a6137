"""The miner role: per round, train in the worker, commit, publish, serve.

    run() = for each round: wait_open → state → work (or reuse) → commit → announce
Every step is idempotent on restart: the chain says whether the commit landed, the data
dir holds the work, so a node killed anywhere resumes without re-training or re-sending.
"""

from __future__ import annotations

from typing import Any

import trio

from miner.cheat import Cheat
from miner.work import MinerJob, MinerOutput, produce
from protocol.chain.client import Phase
from protocol.core.crypto.hashing import content_hash
from protocol.core.errors import ContractRevert
from protocol.core.train.capacity import steps_for_window
from protocol.core.wire.messages import UpdateAnnounced
from protocol.node import round_notes
from protocol.node.context import NodeContext
from protocol.node.global_state import StateMismatch
from protocol.node.logs import kv
from protocol.node.throughput import time_steps

ANNOUNCE_REPEATS = 2  # gossip can drop a message; validators fetch by hash regardless


class MinerNode(NodeContext):
    def __init__(self, *args: Any, cheat: Cheat | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.cheat = cheat  # devnet and tests only; None for every production miner
        self.seconds_per_step = 0.0  # measured at start (`main`), then from each round's training
        if cheat is not None:
            self.p2p.server.checkpoints = cheat.checkpoint_source(self)

    async def main(self, nursery: trio.Nursery) -> None:
        measured = await self._work(time_steps, self.setup.model, self.setup.compute, 1.0, 50, self.config.slowdown)
        self.seconds_per_step = measured.seconds_per_step  # updated from each round's training
        self.log.info("throughput %s", kv(s_per_step=f"{self.seconds_per_step:.4f}",
                                          tokens_per_s=f"{measured.tokens_per_s:.0f}"))
        await self._rounds()

    async def _rounds(self) -> None:
        done = 0
        await self.wait_first_round()
        r = first = self.current_round
        await round_notes.note_passed_rounds(self, r)  # rounds that ran while this node was down
        while self.config.max_rounds is None or done < self.config.max_rounds:
            await self.wait_round_open(r)
            await round_notes.note_fallen_behind(self, r, self.current_round)
            r = self.current_round  # a node that fell behind joins the current round
            round_notes.round_seen(self, r)
            self.log.info("round open %s", kv(round=r, phase="commit"))
            await self._lift_embargoes()  # of rounds a restart or a refused commit left behind
            took_part = await self._work_and_commit(r)
            if took_part:
                await self._announce(r)
            # a node that joins after a round's commit phase closed does not count that round
            done += 1 if took_part or done or r > first else 0
            if self.config.max_rounds is None or done < self.config.max_rounds:
                await self._next_state_early(r)
            await self.wait_round_open(r + 1)
            round_notes.round_done(self, r)
            await self._prune(r + 1)
            r += 1

    async def duties_in(self, round_: int) -> dict[str, bool]:
        return {"commit": bool(await self.port(self.client.call, "rounds", "has_committed", round_, self.address))}

    async def _work_and_commit(self, r: int) -> bool:
        committed = await self.port(self.client.call, "rounds", "has_committed", r, self.address)
        work = self.data.state.recall(r, "work")
        if committed and work:
            return True
        if await self.port.phase(r) != Phase.COMMIT:
            self.log.info("missed the commit phase %s", kv(round=r))
            return False
        if not await self._eligible_at_open(r):
            return False
        if work is None:
            work = await self._new_work(r)
            if work is None:
                return False
        try:
            await self.port(self.client.commit_update, r, bytes.fromhex(work["update_hash"]),
                            bytes.fromhex(work["trace_root"]), int(work.get("steps", 0)))
        except ContractRevert as exc:
            # a commit whose receipt was lost to an RPC outage is retried and then reverts
            # as a duplicate: the chain, not the error, says whether it landed
            if not await self.port(self.client.call, "rounds", "has_committed", r, self.address):
                self.log.warning("commit refused %s", kv(round=r, reason=exc.reason))
                return False
        self.log.info("committed %s", kv(round=r, update=work["update_hash"][:12], trace_root=work["trace_root"][:12],
                                         steps=work.get("steps", self.setup.compute.inner_steps)))
        return True

    async def _new_work(self, r: int) -> dict[str, Any] | None:
        """Train round r and keep the work (None: this node sits the round out)."""
        try:
            out = await self._train(r)
        except StateMismatch as exc:  # no peer serves θ_r yet: sit this round out
            self.log.warning("cannot get the round's model, skipping the round %s", kv(round=r, reason=exc))
            return None
        kept: dict[str, Any] = await trio.to_thread.run_sync(self._keep, r, out)  # ~150 MB, fsynced
        return kept

    async def _eligible_at_open(self, r: int) -> bool:
        """Only miners eligible when round r opened may commit into it: a miner that staked
        later sits the round out instead of training for a commit the chain refuses."""
        since = await self.port(self.client.call, "staking", "eligible_since", self.address)
        if since == 0:
            self.log.warning("not eligible to commit (stake below minimum?) %s", kv(round=r))
            return False
        if since > await self.port(self.client.call, "rounds", "opening_clock", r):
            self.log.info("eligible only after the round opened, joining the next %s", kv(round=r))
            return False
        return True

    async def _train(self, r: int) -> MinerOutput:
        state_blob, state_hash = await self.state_for(r)
        prev = self.data.state.recall(r - 1, "work") if r > 0 else None
        committed_prev = r > 0 and await self.port(self.client.call, "rounds", "has_committed", r - 1, self.address)
        held = prev.get("carry") if prev and committed_prev else None  # absent in older data dirs
        carry_in = self.data.blobs.read(bytes.fromhex(held)) if held else None
        steps = await self._steps_for(r) if self.cheat is None else self.setup.compute.inner_steps
        job = MinerJob(self.setup.spec, self.setup.run_seed, r, self.address, state_blob, state_hash, carry_in,
                       self.client.handle.chain_id, self.client.rounds.address, self.cheat,
                       await self.cheat.foreign_update(self, r) if self.cheat else None, str(self.data.blobs.root),
                       steps, self.config.slowdown)
        self.log.info("training %s", kv(round=r, steps=steps, of=self.setup.compute.inner_steps,
                                        cheat=self.cheat.name if self.cheat else "none"))
        out: MinerOutput = await self._work(produce, job)
        self.metrics.observe_training(out.train_s)
        self.seconds_per_step = out.train_s / out.steps
        return out

    async def _steps_for(self, r: int) -> int:
        """Capacity-scaled work: as many steps as fit in `capacity_margin` of the commit window left."""
        deadline = (await self.port(self.client.round_info, r))["commit_deadline"]
        left = (deadline - await self.next_block_time()) * self.config.capacity_margin
        return steps_for_window(self.setup.compute, self.seconds_per_step, left)

    def _keep(self, r: int, out: MinerOutput) -> dict[str, Any]:
        """Store the work (durably) before committing to it, embargoed first: peers get
        none of it before the round's commit phase closes (`_lift_embargoes`)."""
        own = [content_hash(out.envelope), content_hash(out.carry), *[c for c in out.checkpoints if c is not None]]
        self.data.state.embargo(r, own)
        update_hash = self.data.blobs.put(out.envelope)
        for leaf, (stored, proof) in enumerate(zip(out.checkpoints, out.proofs, strict=True)):
            if stored is not None:  # written (fsynced) by the worker; withheld leaves are not
                self.data.state.index_checkpoint(r, out.trace_root, leaf, stored, proof)
        work = {"update_hash": update_hash.hex(), "trace_root": out.trace_root.hex(),
                "carry": self.data.blobs.put(out.carry).hex(), "size": len(out.envelope), "steps": out.steps}
        self.data.state.record(r, "work", work)
        return work

    async def _next_state_early(self, r: int) -> None:
        """Aggregate θ_{r+1} as soon as round r's result is final, so the next round's training
        starts at once (under the aggregation tree: fetch it by its certified hash). It is checked
        against the certified hash then (`state_for`), and fetched from peers if it differs."""
        while not await self.port(self.port.read.rounds.finalized, r):
            if await self.port(self.client.current_round) > r:  # someone else was faster
                return
            await trio.sleep(self.config.poll_s)
        if self.setup.spec.fan_in:  # the tree: fetch the certified θ_{r+1}, never re-sum every update
            try:
                await self.state_for(r + 1)
            except StateMismatch as exc:
                self.log.info("next model not fetched ahead %s", kv(round=r + 1, reason=exc))
            return
        try:
            blob, got = await self.compute_next(r)
        except StateMismatch as exc:  # an update is unavailable: state_for fetches θ_{r+1}
            self.log.info("next model not computed ahead %s", kv(round=r + 1, reason=exc))
            return
        await self._keep_state(r + 1, got, blob)

    async def _prune(self, current: int) -> None:
        """Free the checkpoints of past rounds nobody can ask about any more: finalized (no
        new report can be filed) and with no open report against this miner (voters fetch
        while one is open). For the tiny model that is ~120 MB per round."""
        for q in self.data.state.checkpoint_rounds():
            if q >= current:
                break
            if not await self.port(self.port.read.rounds.finalized, q):
                continue
            if await self.port(self.port.read.rewards.open_reports, q, self.address):
                continue
            freed = await trio.to_thread.run_sync(self.data.drop_checkpoints, q)
            self.log.info("pruned checkpoints %s", kv(round=q, freed_mb=f"{freed / 1e6:.0f}"))

    async def _lift_embargoes(self) -> None:
        """Serve the work of every round whose commit phase the chain says has closed."""
        for q in self.data.state.embargoed_rounds():
            if await self.port.phase(q) > Phase.COMMIT:
                released = self.data.state.release(q)
                self.log.info("serving the round's work %s", kv(round=q, blobs=released))

    async def _announce(self, r: int) -> None:
        while await self.port.phase(r) == Phase.COMMIT:
            await trio.sleep(self.config.poll_s)
        await self._lift_embargoes()
        work = self.data.state.recall(r, "work")
        assert work is not None
        body = UpdateAnnounced(miner=self.address.lower(), update_hash="0x" + work["update_hash"],
                               trace_root="0x" + work["trace_root"], size=work["size"],
                               multiaddr=self.p2p.listen_addr)
        for _ in range(ANNOUNCE_REPEATS):
            await self.p2p.publish(r, body)
            await trio.sleep(1.0)
        self.log.info("published %s", kv(round=r, update=work["update_hash"][:12]))
