"""Exact replay of one segment of one pipeline stage (issue 32, DESIGN.md §8.4).

A validator of the stage's class takes what is served for the challenged segment j (the start
state, the hashes the stage committed for each step, and the tensors it received: each from the
stage itself or from its sender) and checks that it is what the stage committed: the start
state's hash is trace leaf j, the hashes recompute segment j's boundary root, and each received
tensor hashes to its committed hash. Anything else raises `ServedDataMismatch`: the server did
not serve the committed data, which by itself is not fraud. It then runs `gpipe.stage_step` for
each of the k steps on the public data and compares, in the order the stage sent them, every
sent tensor's hash with the committed one, and finally the end state's hash with leaf j + 1.

Whether the received hashes are what the neighbours signed is `attribution`'s question: this
replay decides whether the stage computed what it committed from what it committed receiving.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from protocol.core.crypto.hashing import Digest
from protocol.core.errors import ConfigError, VeritrainError
from protocol.core.model.config import ModelConfig
from protocol.core.model.gpt import Params
from protocol.core.pipeline.boundary import Direction
from protocol.core.pipeline.gpipe import (
    Received,
    StageTraffic,
    microbatches,
    stage_step,
    tensor_hash,
)
from protocol.core.pipeline.stage_checkpoint import (
    StageCheckpoint,
    capture,
    fits,
    restore,
    stage_state_hash,
)
from protocol.core.pipeline.stage_slots import (
    StageSeat,
    StepHashes,
    expected_counts,
    segment_boundary_root,
)
from protocol.core.pipeline.stage_split import StageSplit
from protocol.core.pipeline.stage_trace import StageTrace, StageTraceError
from protocol.core.train.compute_config import ComputeConfig


class ServedDataMismatch(VeritrainError):
    """Raised when what is served for a stage replay is not what the stage's trace committed: a start
    state whose hash is not the start leaf (or that does not fit the stage), step hashes of the
    wrong count or whose boundary root is not the committed one, or a received tensor that does not
    hash to its committed hash. The server did not serve the committed data; not fraud by itself."""


class StageReplayStatus(enum.StrEnum):
    EXACT = "exact"  # every sent tensor and the end state bit for bit: accepted
    MISMATCH = "mismatch"  # the stage did not compute what it committed: evidence against it


class Differed(enum.StrEnum):
    SENT_TENSOR = "sent-tensor"
    END_CHECKPOINT = "end-checkpoint"


@dataclass(frozen=True)
class Divergence:
    """The first committed value the replay did not reproduce."""

    what: Differed
    step: int  # 1-based; the segment's last step for the end checkpoint
    microbatch: int | None  # a sent tensor's; None for the end checkpoint
    direction: Direction | None
    committed: Digest
    replayed: Digest


@dataclass(frozen=True)
class StageReplayResult:
    stage: int
    segment: int
    status: StageReplayStatus
    divergence: Divergence | None  # None when exact
    # the stage's state hash after each replayed step (what a validator's replay witness covers)
    inner_hashes: tuple[Digest, ...] = ()
    end_params: Params | None = None  # the replayed end state's parameters (exact replays only)


@dataclass(frozen=True)
class StageTask:
    """What a validator knows of a stage's round from the run config and the chain."""

    model: ModelConfig
    split: StageSplit
    cfg: ComputeConfig
    microbatches: int  # M per step
    seat: StageSeat


@dataclass(frozen=True)
class ServedSegment:
    """What is served for one challenged segment of a stage."""

    start: StageCheckpoint
    hashes: tuple[StepHashes, ...]  # per step of the segment, as the stage committed them
    received: tuple[Received, ...]  # per step; the first stage's inputs are ignored (it reads tokens)


def replay_stage_segment(task: StageTask, trace: StageTrace, segment: int, served: ServedSegment,
                         batches: Sequence[tuple[Tensor, Tensor]]) -> StageReplayResult:
    """Replay segment `segment` of `task.seat`'s stage from `served`, on `batches`: the public
    (x, y), (B, T) int64 each, of the segment's k steps. `trace` is the stage's committed trace
    (`stage_trace.check_stage_trace`). Raises ServedDataMismatch on served data that is not the
    committed data, StageTraceError or ConfigError on a segment or batches that do not exist."""
    k, first_step = task.cfg.checkpoint_every, segment * task.cfg.checkpoint_every + 1
    if not 0 <= segment < trace.segments or len(trace.checkpoint_hashes) != trace.segments + 1:
        raise StageTraceError(f"no segment {segment} in a trace of {trace.segments}")
    if len(batches) != k:
        raise ConfigError(f"a segment replays {k} steps, not {len(batches)} batches")
    _check_served(task, trace, segment, served)
    module, state = restore(served.start, task.model, task.split)
    inner: list[Digest] = []
    for i, (x, y) in enumerate(batches):
        step, committed = first_step + i, served.hashes[i]
        received = _received(task, served.received[i], committed, x)
        sent = stage_step(module, state, received.inputs, received.grads, microbatches(y, task.microbatches),
                          task.cfg, step)
        differs = _first_difference(step, committed, sent)
        if differs is not None:
            return StageReplayResult(task.seat.stage, segment, StageReplayStatus.MISMATCH, differs)
        inner.append(stage_state_hash(capture(module, state, step), task.model))
    end = inner[-1]
    if end != trace.checkpoint_hashes[segment + 1]:
        differs = Divergence(Differed.END_CHECKPOINT, first_step + k - 1, None, None,
                             trace.checkpoint_hashes[segment + 1], end)
        return StageReplayResult(task.seat.stage, segment, StageReplayStatus.MISMATCH, differs)
    end_params = capture(module, state, first_step + k - 1).params
    return StageReplayResult(task.seat.stage, segment, StageReplayStatus.EXACT, None, tuple(inner), end_params)


def _check_served(task: StageTask, trace: StageTrace, segment: int, served: ServedSegment) -> None:
    """Raise ServedDataMismatch unless the start state and the step hashes are the committed ones."""
    k, start = task.cfg.checkpoint_every, served.start
    if start.stage != task.seat.stage or start.step != segment * k or not fits(start, task.model, task.split):
        raise ServedDataMismatch(f"the start state is not stage {task.seat.stage}'s after {segment * k} steps")
    if stage_state_hash(start, task.model) != trace.checkpoint_hashes[segment]:
        raise ServedDataMismatch(f"the start state does not hash to leaf {segment}")
    if len(served.hashes) != k or len(served.received) != k:
        raise ServedDataMismatch(f"a segment has {k} steps of hashes and received tensors")
    want = expected_counts(task.seat, task.microbatches)
    for h in served.hashes:
        have = (len(h.received_inputs), len(h.received_grads), len(h.sent_forward), len(h.sent_backward))
        if have != want:
            raise ServedDataMismatch(f"a step of stage {task.seat.stage} has {want} boundary hashes, not {have}")
    if segment_boundary_root(task.seat, segment * k + 1, served.hashes) != trace.boundary_roots[segment]:
        raise ServedDataMismatch(f"the step hashes do not recompute segment {segment}'s boundary root")


def _received(task: StageTask, served: Received, committed: StepHashes, x: Tensor) -> Received:
    """The step's inputs (the token microbatches for the first stage) and output gradients, each
    served tensor checked against its committed hash."""
    tokens = microbatches(x, task.microbatches)
    shape = (*tokens[0].shape, task.model.n_embd)  # (B / M, T, C): every boundary tensor's
    inputs = tokens if task.seat.first else _checked(served.inputs, committed.received_inputs, shape, "input")
    return Received(inputs, _checked(served.grads, committed.received_grads, shape, "output gradient"))


def _checked(tensors: Sequence[Tensor], hashes: Sequence[Digest], shape: tuple[int, ...],
             kind: str) -> tuple[Tensor, ...]:
    """`tensors` as float32 of `shape`; the bytes alone are hashed, so any dtype or shape that
    holds the committed values is accepted and read as what the stage received."""
    if len(tensors) != len(hashes):
        raise ServedDataMismatch(f"{len(tensors)} received {kind}s served for {len(hashes)} committed")
    out = []
    for m, (t, h) in enumerate(zip(tensors, hashes, strict=True)):
        t = t.detach().to(torch.float32).contiguous()
        if t.numel() != torch.Size(shape).numel() or tensor_hash(t) != h:
            raise ServedDataMismatch(f"the received {kind} of microbatch {m} is not the committed one")
        out.append(t.reshape(shape))
    return tuple(out)


def _first_difference(step: int, committed: StepHashes, sent: StageTraffic) -> Divergence | None:
    """The first sent tensor, in sending order (forward 0 .. M-1, then backward M-1 .. 0), whose
    hash is not the committed one."""
    forward, backward = sent.hashes()
    order = [(Direction.FORWARD, m, committed.sent_forward, forward) for m in range(len(forward))]
    order += [(Direction.BACKWARD, m, committed.sent_backward, backward) for m in reversed(range(len(backward)))]
    for direction, m, want, got in order:
        if want[m] != got[m]:
            return Divergence(Differed.SENT_TENSOR, step, m, direction, want[m], got[m])
    return None
