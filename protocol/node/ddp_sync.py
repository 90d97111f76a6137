"""A rank's side of a multi-process miner's process group: the gradient gather and its stepper.

`GatherSync` is the one collective call (an all_gather of a flat vector of gradients and loss);
the fold it applies, the shard each rank trains on and the arithmetic that makes every rank
agree are pure functions in `protocol.core.train.ddp`. The launcher that starts the ranks and
the group is `protocol.node.ddp_worker`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor

from protocol.core.errors import ConfigError
from protocol.core.model.gpt import LanguageModel, ModelConfig
from protocol.core.model.placement import Placement
from protocol.core.train.compute_config import ComputeConfig
from protocol.core.train.ddp import check_world_size, rank_order_mean, sharded
from protocol.core.train.training import BatchFn, LocalStepper


@dataclass(frozen=True)
class GatherSync:
    """`training.GradSync` for a rank of a process group: every rank's gradients become the
    rank-order mean of all ranks' gradients, and the loss returned is the mean of their losses."""

    world_size: int
    group: Any = None  # a torch.distributed process group; None: the default one

    def __call__(self, model: LanguageModel, loss: Tensor) -> Tensor:
        grads = [_grad(name, p) for name, p in model.named_parameters()]
        local = torch.cat([*(g.reshape(-1) for g in grads), loss.detach().float().reshape(1)])  # (N+1,)
        parts = [torch.empty_like(local) for _ in range(self.world_size)]
        dist.all_gather(parts, local, group=self.group)
        mean = rank_order_mean(parts)  # (N+1,)
        offset = 0
        for g in grads:
            g.copy_(mean[offset : offset + g.numel()].view_as(g))
            offset += g.numel()
        return mean[-1]


def _grad(name: str, p: torch.nn.Parameter) -> Tensor:
    if p.grad is None:
        raise ConfigError(f"parameter {name} has no gradient: every rank must train every parameter")
    return p.grad


def rank_stepper(model: LanguageModel, batches: BatchFn, cfg: ComputeConfig, placement: Placement,
                 rank: int, world_size: int, hash_with: ModelConfig | None = None) -> LocalStepper:
    """This rank's stepper: its shard of every batch, gradients gathered across the group. Only
    rank 0 hashes each step's state (`hash_with`): every rank holds the same state."""
    check_world_size(cfg.batch_size, world_size)
    return LocalStepper(model, sharded(batches, rank, world_size), cfg, placement,
                        hash_with=hash_with if rank == 0 else None, sync=GatherSync(world_size))
