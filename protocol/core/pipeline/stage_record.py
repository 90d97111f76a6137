"""Honest records of a pipeline's round, trained in one process (issue 32): per stage its trace, its
state at each segment start, and what it received and sent in every step, tensors and hashes.

Tests and the devnet take their stage records from here, so one place defines what an honest stage
commits. A test that wants a stage to deviate drives `PipelineRecorder` step by step and changes
that stage between steps (its parameters, or a forward hook on its module): the recorder records
what the stages did, whatever it was, as an honest stage would.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from torch import Tensor

from protocol.core.crypto.hashing import Digest
from protocol.core.errors import ConfigError
from protocol.core.pipeline.gpipe import (
    Received,
    StageState,
    StageTraffic,
    pipeline_step,
    tensor_hash,
)
from protocol.core.pipeline.stage_checkpoint import StageCheckpoint, capture, stage_state_hash
from protocol.core.pipeline.stage_module import StageModule
from protocol.core.pipeline.stage_slots import StageSeat, StepHashes, segment_boundary_root
from protocol.core.pipeline.stage_trace import StageTrace
from protocol.core.train.compute_config import ComputeConfig


@dataclass(frozen=True)
class StageIO:
    """One stage's step: what it received, what it sent, and the hashes it commits for them."""

    received: Received  # the first stage's inputs are its token microbatches (public data, unhashed)
    sent: StageTraffic
    hashes: StepHashes


@dataclass(frozen=True)
class StageRecord:
    seat: StageSeat
    trace: StageTrace
    starts: tuple[StageCheckpoint, ...]  # segment j's start: the state after j·k steps
    steps: tuple[StageIO, ...]  # step t (1-based) at index t - 1

    def segment(self, j: int) -> tuple[StageIO, ...]:
        """Segment j's steps."""
        k = len(self.steps) // self.trace.segments
        return self.steps[j * k : (j + 1) * k]


def record_of(seat: StageSeat, k: int, steps: Sequence[StageIO], hashes: Sequence[Digest],
              starts: Sequence[StageCheckpoint]) -> StageRecord:
    """A stage's record of its whole segments: `hashes` its state hash after 0, k, 2k, ... steps,
    `starts` its state at each segment's start, `steps` at least the segments' steps."""
    segments = len(hashes) - 1
    done = list(steps[: segments * k])
    roots = tuple(segment_boundary_root(seat, j * k + 1, [io.hashes for io in done[j * k:(j + 1) * k]])
                  for j in range(segments))
    return StageRecord(seat, StageTrace(tuple(hashes), roots), tuple(starts[:segments]), tuple(done))


def step_hashes(seat: StageSeat, received: Received, sent: StageTraffic) -> StepHashes:
    forward, backward = sent.hashes()
    inputs = () if seat.first else tuple(map(tensor_hash, received.inputs))
    return StepHashes(inputs, tuple(map(tensor_hash, received.grads)), forward, backward)


class PipelineRecorder:
    """Trains `modules` (stage 0 first, with their optimizer `states`) as one pipeline of `round_`,
    one `step` at a time, and records every stage. The modules and states are trained in place."""

    def __init__(self, modules: Sequence[StageModule], states: Sequence[StageState], cfg: ComputeConfig,
                 microbatches: int, round_: int, pipeline: int) -> None:
        self.modules, self.states, self.cfg, self.microbatches = modules, states, cfg, microbatches
        self.seats = [StageSeat(round_, pipeline, s, len(modules)) for s in range(len(modules))]
        self.done = 0  # steps taken
        self._io: list[list[StageIO]] = [[] for _ in modules]
        self._starts: list[list[StageCheckpoint]] = [[] for _ in modules]
        self._hashes: list[list[Digest]] = [[] for _ in modules]
        self._checkpoint()

    def step(self, x: Tensor, y: Tensor) -> None:
        """The pipeline's next step on batch (x, y), (B, T) int64 each."""
        if self.done == self.cfg.inner_steps:
            raise ConfigError(f"the round has {self.cfg.inner_steps} steps, all taken")
        self.done += 1
        traffic, received = pipeline_step(self.modules, self.states, x, y, self.microbatches, self.cfg, self.done)
        for s, seat in enumerate(self.seats):
            self._io[s].append(StageIO(received[s], traffic[s], step_hashes(seat, received[s], traffic[s])))
        if self.done % self.cfg.checkpoint_every == 0:
            self._checkpoint()

    def _checkpoint(self) -> None:
        """Hash every stage's state now (a segment's end), and keep it as the next segment's start."""
        for s, (module, state) in enumerate(zip(self.modules, self.states, strict=True)):
            ck = capture(module, state, self.done)
            self._hashes[s].append(stage_state_hash(ck, module.cfg))
            if self.done < self.cfg.inner_steps:
                self._starts[s].append(ck)

    def records(self) -> list[StageRecord]:
        """Every stage's record of the round (ConfigError before its last step)."""
        if self.done != self.cfg.inner_steps:
            raise ConfigError(f"the round has {self.cfg.inner_steps} steps, {self.done} taken")
        return [self._record(s) for s in range(len(self.seats))]

    def _record(self, s: int) -> StageRecord:
        return record_of(self.seats[s], self.cfg.checkpoint_every, self._io[s], self._hashes[s], self._starts[s])


def record_pipeline(modules: Sequence[StageModule], states: Sequence[StageState],
                    batches: Sequence[tuple[Tensor, Tensor]], cfg: ComputeConfig, microbatches: int, round_: int,
                    pipeline: int) -> list[StageRecord]:
    """An honest round of H = len(`batches`) steps: every stage's record."""
    recorder = PipelineRecorder(modules, states, cfg, microbatches, round_, pipeline)
    for x, y in batches:
        recorder.step(x, y)
    return recorder.records()
