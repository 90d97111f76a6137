"""The attested held-out loss: the loss of a round's starting model θ_r that every validator
reveals with its scores; the lower median of the revealed figures is a word of the round's
result root (PROTOCOL.md §13). The batches are fixed by the run seed and the run config's
`heldout_batches`, so every validator of a class computes the same figure.
"""

from __future__ import annotations

import torch

from protocol.core.crypto.hashing import blake3_hash
from protocol.core.model.gpt import ModelConfig, Params, build_model, load_params
from protocol.core.train.data import Dataset, heldout_batches

Batches = list[tuple[torch.Tensor, torch.Tensor]]  # [(x, y)], each (B, T) int64


def attested_batches(ds: Dataset, run_seed: bytes, n: int, batch_size: int, block_size: int) -> Batches:
    """The run's `n` held-out batches, seeded by `blake3_hash("attested-heldout", run_seed)`."""
    return heldout_batches(ds, blake3_hash("attested-heldout", run_seed), n, batch_size, block_size)


def attested_loss(model_cfg: ModelConfig, params: Params, batches: Batches) -> float:
    """Mean loss of `params` over `batches`, as one float32 forward pass over all of them."""
    model = build_model(model_cfg)
    load_params(model, params)
    x = torch.cat([b[0] for b in batches])  # (n*B, T)
    y = torch.cat([b[1] for b in batches])  # (n*B, T)
    with torch.no_grad():
        return float(model(x, y))
