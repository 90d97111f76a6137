"""One training step of a pipeline, GPipe-style, and the same step of one stage alone.

A step splits the batch into M microbatches (rows in order). Every stage runs the forward pass of
microbatch 0, 1, ..., M-1, sending each output to the next stage, then the backward pass of
microbatch M-1, ..., 0, sending each input's gradient to the previous one; the last stage's loss
of a microbatch is its mean cross-entropy / M, so the gradients are the batch's mean. Each stage then
clips its own gradient norm to `grad_clip` (a per-stage clip: the global norm would couple the stages
within a step) and takes its AdamW step (`training.adamw_update`). Within a stage nothing depends on
timing or on the other stages beyond the tensors it received, so `stage_step` on the received
tensors recomputes a stage's step alone, bit for bit on the same class: the exact stage replay.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from protocol.core.crypto.hashing import Digest
from protocol.core.errors import ConfigError
from protocol.core.model.gpt import Params
from protocol.core.pipeline.stage_module import StageModule
from protocol.core.train.compute_config import ComputeConfig
from protocol.core.train.training import adamw_update
from protocol.core.wire.boundary_tensor import boundary_hash


@dataclass
class StageState:
    """A stage's optimizer moments (its parameters live in its module) and whether they are warm."""

    exp_avg: Params
    exp_avg_sq: Params
    warm: bool = False


@dataclass(frozen=True)
class StageTraffic:
    """What a stage sent in one step: activations forward, input gradients backward (per microbatch)."""

    forward: tuple[Tensor, ...]  # to the next stage; empty for the last
    backward: tuple[Tensor, ...]  # to the previous stage; empty for the first

    def hashes(self) -> tuple[tuple[Digest, ...], tuple[Digest, ...]]:
        return tuple(map(tensor_hash, self.forward)), tuple(map(tensor_hash, self.backward))


def tensor_hash(t: Tensor) -> Digest:
    """blake3 of a boundary tensor's float32 bytes, row-major: what its sender signs (the wire's
    `boundary_hash`, which a receiver computes on the bytes without torch)."""
    return boundary_hash(t.detach().to(torch.float32).contiguous().numpy().tobytes())


def fresh_state(module: StageModule) -> StageState:
    return StageState({k: torch.zeros_like(p) for k, p in module.named_parameters()},
                      {k: torch.zeros_like(p) for k, p in module.named_parameters()})


def microbatches(x: Tensor, count: int) -> tuple[Tensor, ...]:
    if count < 1 or x.shape[0] % count:
        raise ConfigError(f"a batch of {x.shape[0]} rows does not split into {count} microbatches")
    return tuple(x.chunk(count))


class StageStepRun:
    """One stage's step taken one microbatch at a time, as its tensors arrive: `forward` for
    microbatch 0 .. M-1 (each returns the activation to send on), `backward` for M-1 .. 0 (each
    returns the input's gradient to send back), then `finish` (the stage's clip and AdamW step).
    A stage on its own machine sends each tensor as soon as it exists; `stage_step` and
    `pipeline_step` run the same calls, so every way of taking a step gives the same bits."""

    def __init__(self, module: StageModule, state: StageState, cfg: ComputeConfig, step: int, count: int) -> None:
        self.module, self.state, self.cfg, self.step, self.count = module, state, cfg, step, count
        self._inputs: list[Tensor] = []  # what the stage read, as leaves whose gradients it sends back
        self._outputs: list[Tensor] = []  # activations, or the last stage's microbatch losses
        self._grads: list[Tensor | None] = [None] * count
        self._backs = 0  # backward passes taken
        module.zero_grad(set_to_none=True)

    def forward(self, received: Tensor, target: Tensor | None = None) -> Tensor | None:
        """The next microbatch forward: tokens (first stage) or an activation; the activation to
        send to the next stage (None from the last, which reads `target`)."""
        if len(self._outputs) == self.count:
            raise ConfigError(f"a step has {self.count} microbatches, all forwarded")
        x = received if self.module.first else received.detach().requires_grad_(True)
        self._inputs.append(x)
        self._outputs.append(self.module(x, target if self.module.last else None))
        return None if self.module.last else self._outputs[-1].detach()

    def backward(self, grad: Tensor | None = None) -> Tensor | None:
        """The next microbatch backward (last first), from its output's gradient (None for the
        last stage); the gradient of its input to send back (None from the first stage)."""
        m = self.count - 1 - self._backs
        if len(self._outputs) != self.count or m < 0:
            raise ConfigError("backward passes run after every forward, once per microbatch")
        if self.module.last:
            (self._outputs[m] / self.count).backward()
        else:
            self._outputs[m].backward(grad)
        self._backs += 1
        if self.module.first:
            return None
        self._grads[m] = self._inputs[m].grad.detach()  # type: ignore[union-attr]
        return self._grads[m]

    def finish(self) -> StageTraffic:
        """The stage's clip and AdamW step, after every backward; what it sent in this step."""
        if self._backs != self.count:
            raise ConfigError(f"{self._backs} of {self.count} backward passes before the update")
        torch.nn.utils.clip_grad_norm_(self.module.parameters(), self.cfg.grad_clip, foreach=False)
        adamw_update(self.module.named_parameters(), self.state.exp_avg, self.state.exp_avg_sq, self.step, self.cfg,
                     self.state.warm)
        forward = () if self.module.last else tuple(o.detach() for o in self._outputs)
        return StageTraffic(forward, () if self.module.first else tuple(g for g in self._grads if g is not None))


def stage_step(module: StageModule, state: StageState, received: Sequence[Tensor], received_grads: Sequence[Tensor],
               targets: Sequence[Tensor], cfg: ComputeConfig, step: int) -> StageTraffic:
    """Stage `module`'s step `step` (1-based) from what it received: its inputs per microbatch
    (tokens for the first stage) and the gradients of its outputs (none for the last stage, which
    reads `targets` instead). Updates the module's parameters and `state` in place."""
    run = StageStepRun(module, state, cfg, step, len(received))
    for m, x in enumerate(received):
        run.forward(x, targets[m] if module.last else None)
    for m in reversed(range(len(received))):
        run.backward(None if module.last else received_grads[m])
    return run.finish()


@dataclass(frozen=True)
class Received:
    """What one stage received in a step: its inputs and its outputs' gradients, per microbatch."""

    inputs: tuple[Tensor, ...]
    grads: tuple[Tensor, ...]


def pipeline_step(modules: Sequence[StageModule], states: Sequence[StageState], x: Tensor, y: Tensor, count: int,
                  cfg: ComputeConfig, step: int) -> tuple[list[StageTraffic], list[Received]]:
    """The pipeline's step over batch (x, y), (B, T) each, in `count` microbatches: each stage's
    traffic and what each received. Run here in one process, all forwards stage after stage, then
    all backwards from the last; across machines each stage runs `StageStepRun` as tensors arrive."""
    xs, ys = microbatches(x, count), microbatches(y, count)
    runs = [StageStepRun(module, state, cfg, step, count) for module, state in zip(modules, states, strict=True)]
    received_inputs: list[tuple[Tensor, ...]] = []
    inputs: Sequence[Tensor] = xs
    for run in runs:
        received_inputs.append(tuple(inputs))
        inputs = [run.forward(i, ys[m]) for m, i in enumerate(inputs)]  # type: ignore[misc]
    traffic: list[StageTraffic] = []
    received_grads: list[tuple[Tensor, ...]] = []
    grads: tuple[Tensor, ...] = ()
    for run in reversed(runs):
        received_grads.insert(0, grads)
        for m in reversed(range(count)):
            run.backward(grads[m] if grads else None)
        traffic.insert(0, run.finish())
        grads = traffic[0].backward
    return traffic, [Received(i, g) for i, g in zip(received_inputs, received_grads, strict=True)]
