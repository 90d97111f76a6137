"""Dropout whose masks come from the training step's generator, so that a replay draws them again.

`run_steps` carries one CPU `torch.Generator` per trace (its state is every checkpoint's `rng`
tensor) and lends it to the model's `SeededDropout` layers for the steps it runs
(`lend_generator`). A mask is drawn on the CPU from that generator and moved to the model's
device, so the masks, and the generator state a checkpoint records, are the same bits on every
class: a replay from a checkpoint draws the masks the miner drew, and a trace whose `rng` does
not follow from its steps fails the bit-for-bit RNG check (exact and tolerance mode alike).
Outside `run_steps` (held-out loss, scoring) no generator is lent and the layer is the identity.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import Tensor, nn


class SeededDropout(nn.Module):
    def __init__(self, p: float) -> None:
        super().__init__()
        self.p = p
        self.generator: torch.Generator | None = None

    def forward(self, x: Tensor) -> Tensor:
        if self.generator is None or self.p == 0.0:
            return x
        keep = torch.rand(x.shape, generator=self.generator) >= self.p  # CPU draw: the same bits everywhere
        return x * keep.to(device=x.device, dtype=x.dtype) / (1.0 - self.p)


@contextmanager
def lend_generator(model: nn.Module, generator: torch.Generator) -> Iterator[None]:
    """The model's dropout layers draw from `generator` inside the block, and nothing after."""
    layers = [m for m in model.modules() if isinstance(m, SeededDropout)]
    for layer in layers:
        layer.generator = generator
    try:
        yield
    finally:
        for layer in layers:
            layer.generator = None
