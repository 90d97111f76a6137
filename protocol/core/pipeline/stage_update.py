"""A stage miner's committed update (docs/PROTOCOL.md §16.4): the stage's pseudo-gradient θ_r − θ_end
over its own values, in the stage's parameter order, compressed by the run's rule with no error
feedback. The miner makes it from its round's end state; a validator makes it again from the end
state its replay of the last segment reaches, and an update that is not this one is a
`derivation` fault: a stage cannot pass its replays and commit an update it did not train."""

from __future__ import annotations

from collections.abc import Mapping

import torch

from protocol.core.train.compress import compress, encode_update
from protocol.core.train.compute_config import ComputeConfig


def stage_update(start: Mapping[str, torch.Tensor], end: Mapping[str, torch.Tensor], cfg: ComputeConfig) -> bytes:
    """The encoded update from `start` (θ_r's slice) to `end` (the stage's state after its steps)."""
    if list(start) != list(end):
        raise ValueError("the start and end states name different parameters, or in another order")
    delta = torch.cat([(start[k] - end[k]).reshape(-1) for k in start])
    return encode_update(compress(delta, cfg.chunk, cfg.topk, cfg.bits))
