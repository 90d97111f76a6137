"""A stage miner's round (docs/PROTOCOL.md §16.3, §16.4; issue 32): its stage's H steps, one
microbatch at a time as the tensors arrive over the stage link, recorded as its trace.

Each step: forward passes of microbatches 0 .. M-1 (tokens for the first stage, else the
activation from stage - 1; each output is signed and sent to stage + 1 at once), backward passes
of M-1 .. 0 (targets for the last stage, else the gradient from stage + 1; each input's gradient
is sent back to stage - 1 at once), then the stage's clip and AdamW step. The bits do not depend
on when anything arrives (`gpipe.StageStepRun`). A neighbour that does not send in time (or
cannot be sent to) ends the round at the last step the stage finished, rounded down to a whole
segment: those are the steps every stage of the pipeline finished, so the pipeline commits them
and is paid for them, and the silent neighbour is named (`SilentNeighbour`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import trio
from torch import Tensor

from protocol.core.crypto.hashing import Digest
from protocol.core.pipeline.boundary import Direction, Slot
from protocol.core.pipeline.gpipe import (
    Received,
    StageState,
    StageStepRun,
    StageTraffic,
    microbatches,
)
from protocol.core.pipeline.stage_checkpoint import StageCheckpoint, capture, stage_state_hash
from protocol.core.pipeline.stage_module import StageModule
from protocol.core.pipeline.stage_record import StageIO, StageRecord, step_hashes
from protocol.core.pipeline.stage_slots import StageSeat, segment_boundary_root
from protocol.core.pipeline.stage_trace import StageTrace
from protocol.core.train.compute_config import ComputeConfig
from protocol.node.logs import kv
from protocol.p2p.errors import P2PError
from protocol.p2p.stage_inbox import StageInbox
from protocol.p2p.stage_link import StageSender

log = logging.getLogger("veritrain.stage")


@dataclass(frozen=True)
class StageLinks:
    """How a stage reaches its pipeline: its inbox and sender, the pipeline's node keys and
    addresses stage by stage, and how long it waits for one tensor."""

    inbox: StageInbox
    sender: StageSender
    members: Sequence[bytes]
    addrs: Sequence[Sequence[Any]]  # multiaddrs per stage
    wait_s: float


@dataclass(frozen=True)
class SilentNeighbour:
    """The neighbour whose tensor did not come (or could not be delivered), and where."""

    stage: int
    slot: Slot
    reason: str


@dataclass(frozen=True)
class StageRound:
    record: StageRecord  # the trace and traffic of the committed steps
    end: StageCheckpoint  # the state after them: what the stage's update is taken from
    silent: SilentNeighbour | None  # why the round ended early, if it did

    @property
    def steps(self) -> int:
        return self.end.step


class _NeighbourSilent(Exception):
    def __init__(self, silent: SilentNeighbour) -> None:
        self.silent = silent


class _StageRun:
    """One stage's round in progress: the link calls and the record."""

    def __init__(self, module: StageModule, state: StageState, seat: StageSeat, cfg: ComputeConfig, count: int,
                 links: StageLinks) -> None:
        self.module, self.state, self.seat, self.cfg, self.count, self.links = module, state, seat, cfg, count, links
        self.io: list[StageIO] = []
        self.checkpoints = [capture(module, state, 0)]

    def slot(self, stage: int, step: int, m: int, direction: Direction) -> Slot:
        return Slot(self.seat.round, self.seat.pipeline, stage, step, m, direction)

    async def receive(self, slot: Slot) -> Tensor:
        try:
            arrived = await self.links.inbox.receive(slot, self.links.wait_s)
        except P2PError as exc:
            raise _NeighbourSilent(SilentNeighbour(slot.stage, slot, f"{type(exc).__name__}: {exc}")) from exc
        self.links.inbox.release(slot)
        return torch.frombuffer(bytearray(arrived.data), dtype=torch.float32).view(arrived.shape)

    async def send(self, to: int, slot: Slot, t: Tensor) -> None:
        data = t.detach().to(torch.float32).contiguous().numpy().tobytes()
        try:
            await self.links.sender.send(self.links.members[to], slot, data, tuple(t.shape), self.links.addrs[to])
        except P2PError as exc:
            raise _NeighbourSilent(SilentNeighbour(to, slot, f"{type(exc).__name__}: {exc}")) from exc

    async def step(self, step: int, x: Tensor, y: Tensor) -> None:
        s, module = self.seat.stage, self.module
        run = StageStepRun(module, self.state, self.cfg, step, self.count)
        xs, ys = microbatches(x, self.count), microbatches(y, self.count)
        inputs: list[Tensor] = []
        grads: list[Tensor | None] = [None] * self.count
        for m in range(self.count):
            got = xs[m] if module.first else await self.receive(self.slot(s - 1, step, m, Direction.FORWARD))
            inputs.append(got)
            out = await trio.to_thread.run_sync(run.forward, got, ys[m])
            if out is not None:
                await self.send(s + 1, self.slot(s, step, m, Direction.FORWARD), out)
        for m in reversed(range(self.count)):
            grad = None if module.last else await self.receive(self.slot(s + 1, step, m, Direction.BACKWARD))
            grads[m] = grad
            back = await trio.to_thread.run_sync(run.backward, grad)
            if back is not None:
                await self.send(s - 1, self.slot(s, step, m, Direction.BACKWARD), back)
        traffic: StageTraffic = await trio.to_thread.run_sync(run.finish)
        received = Received(tuple(inputs), tuple(g for g in grads if g is not None))
        self.io.append(StageIO(received, traffic, step_hashes(self.seat, received, traffic)))
        if step % self.cfg.checkpoint_every == 0:
            self.checkpoints.append(capture(module, self.state, step))

    def outcome(self, silent: SilentNeighbour | None) -> StageRound:
        """The record of the whole segments finished (all of them when nobody fell silent)."""
        k = self.cfg.checkpoint_every
        segments = len(self.checkpoints) - 1
        steps = self.io[: segments * k]
        roots = tuple(segment_boundary_root(self.seat, j * k + 1, [io.hashes for io in steps[j * k:(j + 1) * k]])
                      for j in range(segments))
        hashes: tuple[Digest, ...] = tuple(stage_state_hash(c, self.module.cfg) for c in self.checkpoints)
        record = StageRecord(self.seat, StageTrace(hashes, roots), tuple(self.checkpoints[:-1]), tuple(steps))
        return StageRound(record, self.checkpoints[-1], silent)


async def run_stage_round(module: StageModule, state: StageState, seat: StageSeat, cfg: ComputeConfig, count: int,
                          batches: Sequence[tuple[Tensor, Tensor]], links: StageLinks,
                          on_step: Callable[[int], None] | None = None) -> StageRound:
    """Stage `seat.stage`'s round of `len(batches)` steps (the pipeline's public (x, y) per step,
    `count` microbatches each), training `module` and `state` in place. Ends early, with the
    whole segments finished, when a neighbour falls silent; `on_step` hears each finished step."""
    run = _StageRun(module, state, seat, cfg, count, links)
    try:
        for step, (x, y) in enumerate(batches, start=1):
            await run.step(step, x, y)
            if on_step is not None:
                on_step(step)
    except _NeighbourSilent as silent:
        log.warning("stage neighbour silent %s", kv(round=seat.round, pipeline=seat.pipeline, stage=seat.stage,
                                                    neighbour=silent.silent.stage, reason=silent.silent.reason))
        return run.outcome(silent.silent)
    return run.outcome(None)
