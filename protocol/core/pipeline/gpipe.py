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


@dataclass
class _Forwarded:
    inputs: list[Tensor]  # what the stage read, as leaves whose gradients it sends back
    outputs: list[Tensor]  # activations, or the last stage's microbatch losses


def _forward(module: StageModule, received: Sequence[Tensor], targets: Sequence[Tensor]) -> _Forwarded:
    """Microbatches 0 .. M-1 through the stage, keeping its graph."""
    module.zero_grad(set_to_none=True)
    inputs = [x if module.first else x.detach().requires_grad_(True) for x in received]
    return _Forwarded(inputs, [module(x, targets[m] if module.last else None) for m, x in enumerate(inputs)])


def _backward_and_update(module: StageModule, state: StageState, done: _Forwarded, received_grads: Sequence[Tensor],
                         cfg: ComputeConfig, step: int) -> StageTraffic:
    """Microbatches M-1 .. 0 backward, the stage's clip and AdamW step; what it sends."""
    count = len(done.outputs)
    for m in reversed(range(count)):
        if module.last:
            (done.outputs[m] / count).backward()
        else:
            done.outputs[m].backward(received_grads[m])
    torch.nn.utils.clip_grad_norm_(module.parameters(), cfg.grad_clip, foreach=False)
    adamw_update(module.named_parameters(), state.exp_avg, state.exp_avg_sq, step, cfg, state.warm)
    return StageTraffic(() if module.last else tuple(o.detach() for o in done.outputs),
                        () if module.first else tuple(x.grad.detach() for x in done.inputs))  # type: ignore[union-attr]


def stage_step(module: StageModule, state: StageState, received: Sequence[Tensor], received_grads: Sequence[Tensor],
               targets: Sequence[Tensor], cfg: ComputeConfig, step: int) -> StageTraffic:
    """Stage `module`'s step `step` (1-based) from what it received: its inputs per microbatch
    (tokens for the first stage) and the gradients of its outputs (none for the last stage, which
    reads `targets` instead). Updates the module's parameters and `state` in place."""
    return _backward_and_update(module, state, _forward(module, received, targets), received_grads, cfg, step)


@dataclass(frozen=True)
class Received:
    """What one stage received in a step: its inputs and its outputs' gradients, per microbatch."""

    inputs: tuple[Tensor, ...]
    grads: tuple[Tensor, ...]


def pipeline_step(modules: Sequence[StageModule], states: Sequence[StageState], x: Tensor, y: Tensor, count: int,
                  cfg: ComputeConfig, step: int) -> tuple[list[StageTraffic], list[Received]]:
    """The pipeline's step over batch (x, y), (B, T) each, in `count` microbatches: each stage's
    traffic and what each received. Run here in one process, all forwards stage after stage, then
    all backwards from the last; across machines each stage runs `stage_step` on what arrives."""
    xs, ys = microbatches(x, count), microbatches(y, count)
    forwarded, received_inputs = [], []
    inputs: Sequence[Tensor] = xs
    for module in modules:
        received_inputs.append(tuple(inputs))
        forwarded.append(_forward(module, inputs, ys))
        inputs = [o.detach() for o in forwarded[-1].outputs]
    traffic: list[StageTraffic] = []
    received_grads: list[tuple[Tensor, ...]] = []
    grads: tuple[Tensor, ...] = ()
    for s in reversed(range(len(modules))):
        received_grads.insert(0, grads)
        traffic.insert(0, _backward_and_update(modules[s], states[s], forwarded[s], grads, cfg, step))
        grads = traffic[0].backward
    return traffic, [Received(i, g) for i, g in zip(received_inputs, received_grads, strict=True)]
