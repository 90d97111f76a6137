"""One pipeline stage as a torch module: the blocks of its `StageSplit` (the embeddings before them
in the first stage, the final norm, head and loss after them in the last), built from the same
classes as the whole model, so its parameters carry the whole model's names and a stage computes
what those layers compute inside the whole model.

The first stage reads tokens (B, T) int64; every other stage reads the previous stage's
activations (B, T, C) float32. Every stage but the last returns activations (B, T, C); the last
returns the mean next-token cross-entropy of the targets (B, T) int64.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from protocol.core.model.config import LlamaConfig, ModelConfig
from protocol.core.model.gpt import Block, Params
from protocol.core.model.llama import LlamaBlock, RMSNorm, rope_tables
from protocol.core.pipeline.stage_split import StageSplit


class StageModule(nn.Module):
    def __init__(self, cfg: ModelConfig, split: StageSplit, stage: int) -> None:
        super().__init__()
        self.cfg, self.stage = cfg, stage
        self.first, self.last = stage == 0, stage == split.count - 1
        llama = isinstance(cfg, LlamaConfig)
        if self.first:
            if llama:
                self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.n_embd)
            else:
                self.wte = nn.Embedding(cfg.vocab_size, cfg.n_embd)
                self.wpe = nn.Embedding(cfg.block_size, cfg.n_embd)
        blocks = nn.ModuleDict({str(i): LlamaBlock(cfg) if llama else Block(cfg)  # type: ignore[arg-type]
                                for i in split.blocks[stage]})
        if llama:
            self.layers = blocks
        else:
            self.h = blocks
        if self.last:
            if llama:
                self.norm = RMSNorm(cfg.n_embd, cfg.norm_eps)  # type: ignore[attr-defined]
            else:
                self.ln_f = nn.LayerNorm(cfg.n_embd, bias=cfg.bias)
            self.lm_head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)

    def forward(self, x: Tensor, targets: Tensor | None = None) -> Tensor:
        t = x.shape[1]
        if isinstance(self.cfg, LlamaConfig):
            cos, sin = rope_tables(self.cfg.n_embd // self.cfg.n_head, t, self.cfg.rope_theta, x.device)
            if self.first:
                x = self.tok_emb(x)  # (B, T, C)
            for block in self.layers.values():
                x = block(x, cos, sin)  # (B, T, C)
            if not self.last:
                return x
            x = self.norm(x)
        else:
            if self.first:
                x = self.wte(x) + self.wpe(torch.arange(t, device=x.device))  # (B, T, C)
            for block in self.h.values():
                x = block(x)  # (B, T, C)
            if not self.last:
                return x
            x = self.ln_f(x)
        logits = self.lm_head(x)  # (B, T, V)
        assert targets is not None, "the last stage needs the targets"
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1))


def stage_params(params: Params, split: StageSplit, stage: int) -> Params:
    """Stage `stage`'s slice of a whole model's parameters, by name."""
    return {name: params[name] for name in split.names[stage]}
