"""A Llama-style decoder: RMSNorm, rotary position embeddings, SwiGLU, grouped-query attention.

Written like `protocol/core/model/gpt.py`'s GPT, with the Hugging Face Llama layout's arithmetic
(rotate-half rotary pairs, the norm computed in float32), so a Hugging Face checkpoint loads
as genesis and gives the same logits (`protocol/core/model/hf_llama.py`). Parameter names follow
ours (`tok_emb`, `layers.i.attn.q_proj`, ...); the mapping to Hugging Face names is there.
With tied embeddings the head reuses `tok_emb.weight`, so the global state holds it once.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from protocol.core.model.gpt import LlamaConfig


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: Tensor) -> Tensor:
        rms = torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + self.eps)  # (B, T, 1)
        return self.weight * (x.float() * rms).to(x.dtype)  # (B, T, C)


def rope_tables(head_size: int, t: int, theta: float, device: torch.device) -> tuple[Tensor, Tensor]:
    """cos and sin (T, hs) of the rotary angles, each frequency repeated for both halves."""
    inv_freq = 1.0 / theta ** (torch.arange(0, head_size, 2, device=device, dtype=torch.int64).float() / head_size)
    angles = torch.outer(torch.arange(t, device=device).float(), inv_freq)  # (T, hs/2)
    emb = torch.cat((angles, angles), dim=-1)  # (T, hs)
    return emb.cos(), emb.sin()


def rotate(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Rotary embedding of (B, nh, T, hs) by rotate-half pairs (i, i + hs/2)."""
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)  # (B, nh, T, hs)
    return x * cos + rotated * sin


class LlamaAttention(nn.Module):
    def __init__(self, cfg: LlamaConfig) -> None:
        super().__init__()
        self.n_head, self.n_kv, self.hs = cfg.n_head, cfg.kv_heads, cfg.n_embd // cfg.n_head
        self.q_proj = nn.Linear(cfg.n_embd, cfg.n_head * self.hs, bias=False)
        self.k_proj = nn.Linear(cfg.n_embd, self.n_kv * self.hs, bias=False)
        self.v_proj = nn.Linear(cfg.n_embd, self.n_kv * self.hs, bias=False)
        self.o_proj = nn.Linear(cfg.n_head * self.hs, cfg.n_embd, bias=False)

    def forward(self, x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
        b, t, c = x.shape  # (B, T, C)
        q = self.q_proj(x).view(b, t, self.n_head, self.hs).transpose(1, 2)  # (B, nh, T, hs)
        k = self.k_proj(x).view(b, t, self.n_kv, self.hs).transpose(1, 2)  # (B, nkv, T, hs)
        v = self.v_proj(x).view(b, t, self.n_kv, self.hs).transpose(1, 2)  # (B, nkv, T, hs)
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        group = self.n_head // self.n_kv
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)  # (B, nh, T, hs)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, nh, T, hs)
        return self.o_proj(y.transpose(1, 2).reshape(b, t, c))  # (B, T, C)


class SwiGLU(nn.Module):
    def __init__(self, cfg: LlamaConfig) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(cfg.n_embd, cfg.hidden, bias=False)
        self.up_proj = nn.Linear(cfg.n_embd, cfg.hidden, bias=False)
        self.down_proj = nn.Linear(cfg.hidden, cfg.n_embd, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))  # (B, T, C)


class LlamaBlock(nn.Module):
    def __init__(self, cfg: LlamaConfig) -> None:
        super().__init__()
        self.attn_norm = RMSNorm(cfg.n_embd, cfg.norm_eps)
        self.attn = LlamaAttention(cfg)
        self.mlp_norm = RMSNorm(cfg.n_embd, cfg.norm_eps)
        self.mlp = SwiGLU(cfg)

    def forward(self, x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
        x = x + self.attn(self.attn_norm(x), cos, sin)  # (B, T, C)
        return x + self.mlp(self.mlp_norm(x))  # (B, T, C)


class Llama(nn.Module):
    def __init__(self, cfg: LlamaConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.layers = nn.ModuleList(LlamaBlock(cfg) for _ in range(cfg.n_layer))
        self.norm = RMSNorm(cfg.n_embd, cfg.norm_eps)
        self.lm_head = None if cfg.tie_embeddings else nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)

    def logits(self, idx: Tensor) -> Tensor:
        """Next-token logits (B, T, V) of (B, T) int64 tokens."""
        _, t = idx.shape
        cos, sin = rope_tables(self.cfg.n_embd // self.cfg.n_head, t, self.cfg.rope_theta, idx.device)
        x = self.tok_emb(idx)  # (B, T, C)
        for block in self.layers:
            x = block(x, cos, sin)  # (B, T, C)
        x = self.norm(x)
        head = self.tok_emb.weight if self.lm_head is None else self.lm_head.weight  # (V, C)
        return F.linear(x, head)  # (B, T, V)

    def forward(self, idx: Tensor, targets: Tensor) -> Tensor:
        """Mean next-token cross-entropy; idx and targets are (B, T) int64."""
        logits = self.logits(idx)  # (B, T, V)
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1))
