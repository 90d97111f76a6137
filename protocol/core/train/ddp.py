"""One rank's share of a multi-process miner: the step math of a world-size-W segment.

A logical miner of world size W (`ReplayProfile.world_size`) trains each step on the very
batch a single-process miner draws (`training.batch_fn`), split into W equal shards by rank:
rank r takes rows [r·B/W, (r+1)·B/W). Each rank's loss is its shard's mean, and after the
backward `GatherSync` gathers every rank's gradients and loss (one all_gather of a flat
vector) and sums them in rank order, ((x_0 + x_1) + x_2) + …, then divides by W. Every rank
computes that same fold from the same gathered bits, so the result depends on W but not on
the backend's reduction algorithm (ring or tree) nor on the rank computing it; for W = 2 the
sum a + b is exact in any order anyway. Equal shards of equal-length rows make the averaged
loss the whole batch's mean loss, as the single-process miner defines it, so the world size
is the only thing that changes bits. Every rank then clips and takes the identical AdamW
step (`training.run_steps`), so all ranks hold the same state and rank 0's checkpoints are
the miner's trace.

Nothing here starts processes: a rank runs this inside a torch.distributed group that its
launcher (protocol/node/ddp_worker.py) set up.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor

from protocol.core.errors import ConfigError
from protocol.core.model.gpt import LanguageModel, ModelConfig
from protocol.core.model.placement import Placement
from protocol.core.train.compute_config import ComputeConfig
from protocol.core.train.training import BatchFn, LocalStepper


class WorldSizeError(ConfigError):
    """Raised when a batch cannot be split into world_size equal shards (or the world size is
    not a positive count)."""


def check_world_size(batch_size: int, world_size: int) -> None:
    if world_size < 1 or batch_size % world_size:
        raise WorldSizeError(f"a batch of {batch_size} sequences cannot be split into {world_size} equal shards "
                             "(batch_size must be a multiple of the world size)")


def shard(t: Tensor, rank: int, world_size: int) -> Tensor:
    """Rank `rank`'s rows of a (B, ...) tensor: [rank·B/W, (rank+1)·B/W)."""
    check_world_size(t.shape[0], world_size)
    rows = t.shape[0] // world_size
    return t[rank * rows : (rank + 1) * rows]


def sharded(batches: BatchFn, rank: int, world_size: int) -> BatchFn:
    """`batches` with each step's (x, y) cut to this rank's shard."""
    def shard_of(step: int) -> tuple[Tensor, Tensor]:
        x, y = batches(step)  # (B, T), (B, T)
        return shard(x, rank, world_size), shard(y, rank, world_size)  # (B/W, T), (B/W, T)
    return shard_of


def rank_order_mean(parts: Sequence[Tensor]) -> Tensor:
    """((parts[0] + parts[1]) + parts[2]) + … divided by len(parts): the documented sum order."""
    total = parts[0].clone()
    for p in parts[1:]:
        total.add_(p)
    return total.div_(len(parts))


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
