"""A pipeline stage's replayable state and its hash (issue 32): the stage's parameters, both AdamW
moments, whether the second moment is warm, and how many steps it has taken this round.

The hash is built like a whole checkpoint's (`checkpoint.format`): each tensor hashed alone
(`tensor_digest`: dtype, shape, raw bytes) under its key (`p/<name>`, `m/<name>`, `v/<name>`,
the whole model's parameter names), then `hash_digests` over a header and the sorted keys, in
its own domain ("stage-checkpoint"), so a stage's state hash is never a whole checkpoint's. The
header binds the model config, the stage index, the step and the warm flag.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from protocol.core.checkpoint.format import hash_digests, tensor_digest
from protocol.core.crypto.hashing import Digest, u64
from protocol.core.model.config import ModelConfig, config_hash
from protocol.core.model.gpt import Params
from protocol.core.pipeline.gpipe import StageState
from protocol.core.pipeline.stage_module import StageModule
from protocol.core.pipeline.stage_split import StageSplit


@dataclass(frozen=True)
class StageCheckpoint:
    """One stage's state after `step` steps of the round, detached from any module."""

    stage: int
    step: int
    params: Params  # name -> float32 tensor, the stage's own parameters in model order
    exp_avg: Params  # AdamW first moment
    exp_avg_sq: Params  # AdamW second moment
    warm: bool


def capture(module: StageModule, state: StageState, step: int) -> StageCheckpoint:
    """A copy of the stage's live state: later steps do not change it."""
    params = {k: p.detach().clone() for k, p in module.named_parameters()}
    return StageCheckpoint(module.stage, step, params, _cloned(state.exp_avg), _cloned(state.exp_avg_sq), state.warm)


def restore(ck: StageCheckpoint, model: ModelConfig, split: StageSplit) -> tuple[StageModule, StageState]:
    """A fresh module and optimizer state holding copies of `ck` (which stays unchanged)."""
    with torch.device("meta"):  # no initialisation: every parameter is overwritten below
        module = StageModule(model, split, ck.stage)
    module.to_empty(device="cpu")
    with torch.no_grad():
        for name, p in module.named_parameters():
            p.copy_(ck.params[name])
    return module, StageState(_cloned(ck.exp_avg), _cloned(ck.exp_avg_sq), ck.warm)


def fits(ck: StageCheckpoint, model: ModelConfig, split: StageSplit) -> bool:
    """Whether `ck` holds exactly the stage's parameters and moments, float32, in their shapes."""
    shapes = split.shapes(model, ck.stage) if 0 <= ck.stage < split.count else None
    return shapes is not None and all(
        list(group) == list(shapes)
        and all(t.dtype == torch.float32 and tuple(t.shape) == shapes[k] for k, t in group.items())
        for group in (ck.params, ck.exp_avg, ck.exp_avg_sq))


def stage_state_hash(ck: StageCheckpoint, model: ModelConfig) -> Digest:
    """The stage state's hash: a trace's checkpoint leaf."""
    header = config_hash(model) + u64(ck.stage) + u64(ck.step) + bytes([ck.warm])
    leaves = {f"{prefix}/{k}": tensor_digest(t)
              for prefix, group in (("p", ck.params), ("m", ck.exp_avg), ("v", ck.exp_avg_sq))
              for k, t in group.items()}
    return hash_digests("stage-checkpoint", header, leaves)


def _cloned(tensors: Params) -> Params:
    return {k: t.detach().clone() for k, t in tensors.items()}
