"""One stage's round driven one microbatch at a time, on bytes (docs/PROTOCOL.md §16.4): what a
stage miner's worker runs while its node moves the tensors over the stage link.

The node calls, per step t: `forward(t, received)` for microbatches 0 .. M-1 (received: the
activation's float32 bytes, None for the first stage, which reads its tokens), `backward(t,
received)` for M-1 .. 0 (the output gradient's bytes, None for the last stage, which reads its
targets), then `finish(t)`. Each call returns the tensor to send on, as bytes (None when there is
nobody to send to). The driver records every step (`stage_record.StageIO`) and the stage's state
every k steps, and `outcome` gives the record of the whole segments finished: all H steps, or
fewer when the round ended early (a silent neighbour).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from protocol.core.errors import ConfigError
from protocol.core.pipeline.gpipe import Received, StageState, StageStepRun, microbatches
from protocol.core.pipeline.stage_checkpoint import StageCheckpoint, capture, stage_state_hash
from protocol.core.pipeline.stage_module import StageModule
from protocol.core.pipeline.stage_record import StageIO, StageRecord, record_of, step_hashes
from protocol.core.pipeline.stage_slots import StageSeat
from protocol.core.train.compute_config import ComputeConfig


@dataclass(frozen=True)
class StageOutcome:
    record: StageRecord  # the trace and traffic of the whole segments finished
    end: StageCheckpoint  # the state after them: what the stage's update is taken from

    @property
    def steps(self) -> int:
        return self.end.step


def as_bytes(t: Tensor) -> bytes:
    """A boundary tensor's float32 bytes, row-major (what its sender hashes and signs)."""
    return t.detach().to(torch.float32).contiguous().numpy().tobytes()


class StageDriver:
    """Stage `seat.stage`'s round over `batches` (the pipeline's (x, y) per step), `count`
    microbatches a step, training `module` and `state` in place."""

    def __init__(self, module: StageModule, state: StageState, seat: StageSeat, cfg: ComputeConfig, count: int,
                 batches: Sequence[tuple[Tensor, Tensor]]) -> None:
        self.module, self.state, self.seat, self.cfg, self.count = module, state, seat, cfg, count
        self.batches = batches
        self.shape = (batches[0][0].shape[0] // count, module.cfg.block_size, module.cfg.n_embd)
        self.io: list[StageIO] = []
        self.checkpoints = [capture(module, state, 0)]
        self._run: StageStepRun | None = None
        self._inputs: list[Tensor] = []
        self._grads: list[Tensor | None] = []
        self._backs = 0  # backward passes taken in this step

    def _step(self, step: int) -> StageStepRun:
        if self._run is None or self._run.step != step:
            if step != len(self.io) + 1 or step > len(self.batches):
                raise ConfigError(f"step {step} out of turn: {len(self.io)} of {len(self.batches)} taken")
            self._run = StageStepRun(self.module, self.state, self.cfg, step, self.count)
            self._inputs, self._grads, self._backs = [], [None] * self.count, 0
        return self._run

    def _tensor(self, data: bytes) -> Tensor:
        return torch.frombuffer(bytearray(data), dtype=torch.float32).view(self.shape)

    def forward(self, step: int, received: bytes | None) -> bytes | None:
        """The next microbatch's forward pass; the activation to send to the next stage."""
        run = self._step(step)
        x, y = (microbatches(t, self.count)[len(self._inputs)] for t in self.batches[step - 1])
        got = x if self.module.first else self._tensor(received or b"")
        self._inputs.append(got)
        out = run.forward(got, y)
        return None if out is None else as_bytes(out)

    def backward(self, step: int, received: bytes | None) -> bytes | None:
        """The next microbatch's backward pass (last first); the input gradient to send back."""
        run = self._step(step)
        grad = None if self.module.last else self._tensor(received or b"")
        self._grads[self.count - 1 - self._backs] = grad
        self._backs += 1
        back = run.backward(grad)
        return None if back is None else as_bytes(back)

    def finish(self, step: int) -> None:
        """The stage's clip and AdamW step; the step's record; a checkpoint every k steps."""
        traffic = self._step(step).finish()
        received = Received(tuple(self._inputs), tuple(g for g in self._grads if g is not None))
        self.io.append(StageIO(received, traffic, step_hashes(self.seat, received, traffic)))
        self._run = None
        if step % self.cfg.checkpoint_every == 0:
            self.checkpoints.append(capture(self.module, self.state, step))

    def outcome(self) -> StageOutcome:
        """The record of the whole segments finished."""
        hashes = [stage_state_hash(c, self.module.cfg) for c in self.checkpoints]
        record = record_of(self.seat, self.cfg.checkpoint_every, self.io, hashes, self.checkpoints)
        return StageOutcome(record, self.checkpoints[-1])
