"""A stage miner's round (docs/PROTOCOL.md §16.4; issue 32): the node moves the tensors over the
stage link while the stage's `StageDriver` computes, in the class's worker (or any `compute`).

Each step: forward passes of microbatches 0 .. M-1 (the activation from stage - 1 in, each output
signed and sent to stage + 1 at once), backward passes of M-1 .. 0 (the gradient from stage + 1
in, each input's gradient sent back to stage - 1 at once), then the stage's update. The bits do
not depend on when anything arrives (`gpipe.StageStepRun`). A neighbour that does not send in
time, or cannot be sent to, ends the round at the last whole segment finished: the steps every
stage of the pipeline finished, which the pipeline commits; the neighbour is named
(`SilentNeighbour`). Who fell silent is decided by who commits, not by one stage's view: a stage
further up names its own neighbour.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import trio

from protocol.core.pipeline.boundary import Direction, Slot
from protocol.core.pipeline.stage_slots import StageSeat
from protocol.node.logs import kv
from protocol.p2p.errors import P2PError, PeerRefused, PeerUnavailable, RateLimited
from protocol.p2p.stage_inbox import StageInbox
from protocol.p2p.stage_link import NotNeighbour, SlotFilled, StageSender, UnexpectedSlot

log = logging.getLogger("veritrain.stage")
# refusals of a neighbour that is there but not ready for the slot yet: asked again
NOT_READY = (UnexpectedSlot, NotNeighbour, PeerRefused, RateLimited, PeerUnavailable)
RETRY_S = 0.2

# compute(method, *args): runs StageDriver.<method>(*args) where the driver lives, returns its result
Compute = Callable[..., Awaitable[Any]]


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
    # what compute("outcome") gave: the driver's `StageOutcome` (the record of the whole segments
    # finished and the state after them), or what a node closes the round into (`stage_work.StageWork`)
    outcome: Any
    silent: SilentNeighbour | None  # why the round ended early, if it did

    @property
    def steps(self) -> int:
        return int(self.outcome.steps)


class _NeighbourSilent(Exception):
    def __init__(self, silent: SilentNeighbour) -> None:
        self.silent = silent


class _Shuttle:
    """The link side of one stage's round: receive, compute, send."""

    def __init__(self, seat: StageSeat, links: StageLinks, compute: Compute, count: int) -> None:
        self.seat, self.links, self.compute, self.count = seat, links, compute, count
        self.first, self.last = seat.stage == 0, seat.stage == seat.stages - 1

    def slot(self, stage: int, step: int, m: int, direction: Direction) -> Slot:
        return Slot(self.seat.round, self.seat.pipeline, stage, step, m, direction)

    async def receive(self, slot: Slot) -> bytes:
        try:
            arrived = await self.links.inbox.receive(slot, self.links.wait_s)
        except P2PError as exc:
            raise _NeighbourSilent(SilentNeighbour(slot.stage, slot, f"{type(exc).__name__}: {exc}")) from exc
        self.links.inbox.release(slot)
        return arrived.data

    async def send(self, to: int, slot: Slot, data: bytes, shape: tuple[int, ...]) -> None:
        """Deliver one tensor. A neighbour not ready for it yet (its round not open, our registration
        not yet synced there, its host still starting) is asked again until the wait runs out,
        as long as a silent one is waited for."""
        deadline = trio.current_time() + self.links.wait_s
        while True:
            try:
                await self.links.sender.send(self.links.members[to], slot, data, shape, self.links.addrs[to])
                return
            except SlotFilled:
                return  # an earlier try of ours was kept, its answer lost
            except NOT_READY as exc:
                if trio.current_time() + RETRY_S >= deadline:
                    raise _NeighbourSilent(SilentNeighbour(to, slot, f"{type(exc).__name__}: {exc}")) from exc
                await trio.sleep(RETRY_S)
            except P2PError as exc:
                raise _NeighbourSilent(SilentNeighbour(to, slot, f"{type(exc).__name__}: {exc}")) from exc

    async def step(self, step: int, shape: tuple[int, ...]) -> None:
        s = self.seat.stage
        for m in range(self.count):
            got = None if self.first else await self.receive(self.slot(s - 1, step, m, Direction.FORWARD))
            out = await self.compute("forward", step, got)
            if out is not None:
                await self.send(s + 1, self.slot(s, step, m, Direction.FORWARD), out, shape)
        for m in reversed(range(self.count)):
            grad = None if self.last else await self.receive(self.slot(s + 1, step, m, Direction.BACKWARD))
            back = await self.compute("backward", step, grad)
            if back is not None:
                await self.send(s - 1, self.slot(s, step, m, Direction.BACKWARD), back, shape)
        await self.compute("finish", step)


async def run_stage_round(seat: StageSeat, steps: int, count: int, shape: tuple[int, ...], links: StageLinks,
                          compute: Compute, on_step: Callable[[int], None] | None = None) -> StageRound:
    """Stage `seat.stage`'s round of `steps` steps of `count` microbatches, each boundary tensor of
    `shape` (`wire.boundary_tensor.boundary_shape`), computed by `compute` (a `StageDriver`'s
    methods, wherever it lives). Ends early, with the whole segments finished, when a neighbour
    falls silent; `on_step` hears each finished step."""
    shuttle = _Shuttle(seat, links, compute, count)
    silent: SilentNeighbour | None = None
    try:
        for step in range(1, steps + 1):
            await shuttle.step(step, shape)
            if on_step is not None:
                on_step(step)
    except _NeighbourSilent as exc:
        silent = exc.silent
        log.warning("stage neighbour silent %s", kv(round=seat.round, pipeline=seat.pipeline, stage=seat.stage,
                                                    neighbour=silent.stage, reason=silent.reason))
    return StageRound(await compute("outcome"), silent)
