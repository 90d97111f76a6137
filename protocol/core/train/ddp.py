"""One rank's share of a multi-process miner: the step math of a world-size-W segment.

A logical miner of world size W (`ReplayProfile.world_size`) trains each step on the very
batch a single-process miner draws (`training.batch_fn`), split into W equal shards by rank:
rank r takes rows [r·B/W, (r+1)·B/W). Each rank's loss is its shard's mean, and after the
backward every rank's gradients and loss are gathered (one all_gather of a flat vector,
`protocol.node.ddp_sync.GatherSync`), summed in rank order, ((x_0 + x_1) + x_2) + …, and divided
by W (`rank_order_mean`). Every rank computes that same fold from the same gathered bits, so the result depends on W but not on
the backend's reduction algorithm (ring or tree) nor on the rank computing it; for W = 2 the
sum a + b is exact in any order anyway. Equal shards of equal-length rows make the averaged
loss the whole batch's mean loss, as the single-process miner defines it, so the world size
is the only thing that changes bits. Every rank then clips and takes the identical AdamW
step (`training.run_steps`), so all ranks hold the same state and rank 0's checkpoints are
the miner's trace.

Nothing here talks to a process group: the gather and the rank's stepper live in
protocol/node/ddp_sync.py, inside the torch.distributed group that protocol/node/ddp_worker.py
set up. These are the pure pieces: the shard, and the fold every rank computes.
"""

from __future__ import annotations

from collections.abc import Sequence

from torch import Tensor

from protocol.core.errors import ConfigError
from protocol.core.train.training import BatchFn


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
