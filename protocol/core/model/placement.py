"""Where the inner loop's math runs, and in what precision (from the replay profile).

Parameters and AdamW state are float32 wherever they live. Under "bf16-autocast" the forward
pass and the loss run under torch.autocast(bfloat16) and the backward follows the dtypes the
forward chose; the gradients, the optimizer step and every checkpoint stay float32.
Checkpoints always come back as CPU tensors, so a hash never depends on where it was
computed (`training.run_steps` moves params, batches and moments to the device once, and back).
"""

from __future__ import annotations

import contextlib
from contextlib import AbstractContextManager
from dataclasses import dataclass

import torch

from protocol.core.hardware.replay_profile import BF16_AUTOCAST, ReplayProfile


@dataclass(frozen=True)
class Placement:
    device: str = "cpu"  # a torch device string: "cpu", "cuda", "cuda:1"
    bf16_autocast: bool = False  # forward and loss under torch.autocast(bfloat16)

    @property
    def torch_device(self) -> torch.device:
        return torch.device(self.device)

    @property
    def on_host(self) -> bool:
        """Whether the math runs on the CPU, where checkpoints live: nothing is moved or copied back."""
        return self.torch_device.type == "cpu"

    def autocast(self) -> AbstractContextManager[object]:
        if not self.bf16_autocast:
            return contextlib.nullcontext()
        return torch.autocast(self.torch_device.type, dtype=torch.bfloat16)


CPU = Placement()


def placement_of(profile: ReplayProfile, rank: int | None = None) -> Placement:
    """The placement `profile` prescribes; `rank` (of a multi-process CUDA miner) picks cuda:rank."""
    device = profile.device
    if rank is not None and torch.device(device).type == "cuda":
        device = f"cuda:{rank}"
    return Placement(device, profile.dtype == BF16_AUTOCAST)
