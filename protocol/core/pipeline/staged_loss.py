"""The loss of a whole model computed one stage at a time (docs/PROTOCOL.md §16.5): how a validator
of a staged run scores updates and attests the held-out loss without holding the whole model.

Stage 0's parameters are loaded and run the batch to its activations (B, T, C); they are dropped,
stage 1's are loaded and run those on, and so on; the last stage returns the mean loss. Under
no_grad nothing else is kept, so the peak is one stage's parameters, one batch's activations and
the last stage's logits (`scoring_memory`), and the bits are the whole model's forward pass's
(the stages compute what those layers compute inside the whole model: tests/core).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from protocol.core.model.config import LlamaConfig, ModelConfig
from protocol.core.model.gpt import Params, load_params
from protocol.core.pipeline.stage_memory import FLOAT
from protocol.core.pipeline.stage_module import StageModule
from protocol.core.pipeline.stage_split import StageSplit


def staged_loss(cfg: ModelConfig, split: StageSplit, load_stage: Callable[[int], Params], x: Tensor, y: Tensor) -> float:
    """Mean next-token loss of the model whose stage s has the parameters `load_stage(s)`, over
    tokens `x` and targets `y` (B, T) int64, holding one stage at a time."""
    with torch.no_grad():
        out = x
        for stage in range(split.count):
            module = StageModule(cfg, split, stage)
            load_params(module, load_stage(stage))
            out = module(out, y if module.last else None)
            del module  # before the next stage is built: one stage's parameters at a time
        return float(out)


def scoring_memory(cfg: ModelConfig, split: StageSplit, rows: int) -> int:
    """Bytes `staged_loss` holds at most on `rows` sequences: the largest stage's parameters, the
    activations entering and leaving a block with one block's transient values (attention scores,
    feed-forward hidden), and for the last stage the logits and their log-softmax."""
    tokens = rows * cfg.block_size
    hidden = cfg.hidden if isinstance(cfg, LlamaConfig) else 4 * cfg.n_embd
    block = tokens * (3 * cfg.n_embd + hidden) + rows * cfg.n_head * cfg.block_size ** 2
    logits = 2 * tokens * cfg.vocab_size
    return (max(split.sizes(cfg)) + block + logits) * FLOAT
