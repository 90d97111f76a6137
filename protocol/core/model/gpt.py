"""The model families, built from a frozen config: a nanoGPT-style byte-level GPT (vocab 256)
here, and a Llama-style decoder in `protocol/core/model/llama.py`. Their configs and presets are
`protocol/core/model/config.py` (torch-free).

Weights are *not* tied (safetensors refuses shared storage, and the global state is a flat
list of independent tensors). Dropout is 0 in every preset, so a forward pass draws no
random numbers; a config with `dropout` > 0 draws its masks from the training step's generator
(`protocol/core/model/dropout.py`), so a replay draws the same ones. Parameter order is `named_parameters()` order, fixed by this code, and
`flatten`/`unflatten` use it for the flat vectors that compression and aggregation see.
"""

from __future__ import annotations

import functools
import math

import blake3
import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from protocol.core.crypto.hashing import blake3_hash
from protocol.core.errors import ConfigError
from protocol.core.model.config import PRESETS as PRESETS
from protocol.core.model.config import LlamaConfig, ModelConfig, layout
from protocol.core.model.config import config_hash as config_hash
from protocol.core.model.config import preset as preset
from protocol.core.model.dropout import SeededDropout

Params = dict[str, Tensor]  # ordered name -> tensor, in named_parameters() order


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.n_head = cfg.n_head
        self.c_attn = nn.Linear(cfg.n_embd, 3 * cfg.n_embd, bias=cfg.bias)
        self.c_proj = nn.Linear(cfg.n_embd, cfg.n_embd, bias=cfg.bias)

    def forward(self, x: Tensor) -> Tensor:
        b, t, c = x.shape  # (B, T, C)
        q, k, v = self.c_attn(x).split(c, dim=2)  # 3 x (B, T, C)
        hs = c // self.n_head
        q = q.view(b, t, self.n_head, hs).transpose(1, 2)  # (B, nh, T, hs)
        k = k.view(b, t, self.n_head, hs).transpose(1, 2)  # (B, nh, T, hs)
        v = v.view(b, t, self.n_head, hs).transpose(1, 2)  # (B, nh, T, hs)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, nh, T, hs)
        y = y.transpose(1, 2).contiguous().view(b, t, c)  # (B, T, C)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.c_fc = nn.Linear(cfg.n_embd, 4 * cfg.n_embd, bias=cfg.bias)
        self.c_proj = nn.Linear(4 * cfg.n_embd, cfg.n_embd, bias=cfg.bias)

    def forward(self, x: Tensor) -> Tensor:
        return self.c_proj(F.gelu(self.c_fc(x)))  # (B, T, C)


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(cfg.n_embd, bias=cfg.bias)
        self.attn = CausalSelfAttention(cfg)
        self.ln_2 = nn.LayerNorm(cfg.n_embd, bias=cfg.bias)
        self.mlp = MLP(cfg)
        self.drop = SeededDropout(cfg.dropout)  # no parameters: named_parameters() is unchanged

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.drop(self.attn(self.ln_1(x)))  # (B, T, C)
        return x + self.drop(self.mlp(self.ln_2(x)))  # (B, T, C)


class GPT(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.wte = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.wpe = nn.Embedding(cfg.block_size, cfg.n_embd)
        self.h = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.n_embd, bias=cfg.bias)
        self.lm_head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)

    def forward(self, idx: Tensor, targets: Tensor) -> Tensor:
        """Mean next-token cross-entropy; idx and targets are (B, T) int64."""
        logits = self.logits(idx)  # (B, T, V)
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1))

    def logits(self, idx: Tensor) -> Tensor:
        """Next-token logits (B, T, V) of (B, T) int64 tokens."""
        _, t = idx.shape
        x = self.wte(idx) + self.wpe(torch.arange(t, device=idx.device))  # (B, T, C)
        for block in self.h:
            x = block(x)  # (B, T, C)
        return self.lm_head(self.ln_f(x))  # (B, T, V)


LanguageModel = nn.Module  # GPT or Llama: model(idx, targets) -> mean loss; logits(idx) -> (B, T, V)
RESIDUAL_OUTPUTS = ("c_proj.weight", "o_proj.weight", "down_proj.weight")  # scaled at init (GPT-2)


def build_model(cfg: ModelConfig) -> LanguageModel:
    """The model `cfg` describes: a `Llama` for a `LlamaConfig`, else a `GPT`."""
    if isinstance(cfg, LlamaConfig):
        from protocol.core.model.llama import Llama

        return Llama(cfg)
    return GPT(cfg)


INIT_STD = 0.02  # GPT-2's weight std; residual outputs get INIT_STD / sqrt(2 n_layer)
_INIT_CHUNK = 1 << 22  # values drawn per pass (16 MiB of stream): bounds memory on big tensors


def init_params(cfg: ModelConfig, seed: int) -> Params:
    """Genesis θ, a function of (`seed`, tensor names and shapes) alone, for either family: every
    matrix (embeddings too) uniform with GPT-2's std (0.02; residual outputs 0.02 / sqrt(2 n_layer)),
    norm gains 1, biases 0. Only integer hashing and correctly rounded IEEE operations are used,
    never an RNG kernel, so every CPU class (no-SIMD included) computes the same bits.
    docs/PROTOCOL.md §2.5 specifies it for foreign implementations."""
    std_proj = INIT_STD / math.sqrt(2 * cfg.n_layer)
    out: Params = {}
    for name, shape in _shapes(cfg):
        if name.endswith(RESIDUAL_OUTPUTS):
            t = uniform_init(seed, name, shape, std_proj)
        elif len(shape) >= 2:
            t = uniform_init(seed, name, shape, INIT_STD)
        elif name.endswith("weight"):  # LayerNorm / RMSNorm gains
            t = torch.ones(shape, dtype=torch.float32)
        else:  # biases
            t = torch.zeros(shape, dtype=torch.float32)
        out[name] = t
    return out


def uniform_init(seed: int, name: str, shape: tuple[int, ...], std: float) -> Tensor:
    """float32 values of mean 0 and std ≈ `std`, in row-major order. Value i takes the i-th
    little-endian u32 x of the blake3 XOF of key = blake3_hash("genesis-init", str(seed), name):
    k = x >> 8 (24 bits), j = 2k + 1 - 2^24 (an odd integer, |j| < 2^24), value =
    float32(j × c × 2^-24) with c = float32(std × sqrt(3)): uniform on (-std√3, std√3), variance
    std² (1 - 2^-48)."""
    c = np.float32(std * math.sqrt(3.0))  # float64 ×, correctly rounded sqrt, one rounding to float32
    scale = c * np.float32(2.0**-24)  # exact: a power-of-two scaling of a normal float32
    n = math.prod(shape)
    key = blake3_hash("genesis-init", str(seed).encode(), name.encode())
    xof = blake3.blake3(key)
    out = np.empty(n, dtype=np.float32)
    for at in range(0, n, _INIT_CHUNK):
        m = min(_INIT_CHUNK, n - at)
        j = (np.frombuffer(xof.digest(length=4 * m, seek=4 * at), dtype="<u4") >> 8).view(np.int32)
        j *= 2
        j += 1 - (1 << 24)  # int32 throughout: |2k + 1 - 2^24| < 2^24
        # int32 -> float32 is exact below 2^24, and j × scale is one float32 multiply, correctly
        # rounded whether numpy's loop is scalar or SIMD (a ufunc is one operation: nothing to
        # contract into a fused multiply-add). It equals rounding j × c × 2^-24 once: that product
        # has at most 48 significant bits, so it is exact in float64 too
        np.multiply(j.astype(np.float32), scale, out=out[at : at + m])
    return torch.from_numpy(out).reshape(shape)


@functools.lru_cache(maxsize=16)
def _shapes(cfg: ModelConfig) -> tuple[tuple[str, tuple[int, ...]], ...]:
    # the torch-free layout (tests/test_torch_free.py checks it against the built model): a
    # model built on the meta device would import torch._dynamo, 1.3 s of every node's start
    return tuple(layout(cfg).items())


def param_shapes(cfg: ModelConfig) -> dict[str, tuple[int, ...]]:
    """Expected name -> shape map, used to validate every tensor a peer sends (cached)."""
    return dict(_shapes(cfg))


def num_params(cfg: ModelConfig) -> int:
    return sum(math.prod(s) for s in param_shapes(cfg).values())


def load_params(model: LanguageModel, params: Params) -> None:
    """Copy `params` into the model's own parameter tensors (same names, same shapes)."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(params[name])


def flatten(params: Params) -> Tensor:
    """Concatenate tensors in their dict order into one float32 vector (N,)."""
    return torch.cat([t.reshape(-1) for t in params.values()])


def flat_difference(a: Params, b: Params) -> Tensor:
    """`flatten(a) - flatten(b)`, the same bits, without building either flat copy (N,)."""
    out = torch.empty(sum(t.numel() for t in a.values()), dtype=torch.float32)
    at = 0
    for key, t in a.items():
        n = t.numel()
        torch.sub(t.reshape(-1), b[key].reshape(-1), out=out[at : at + n])
        at += n
    return out


def unflatten(flat: Tensor, shapes: dict[str, tuple[int, ...]]) -> Params:
    """Inverse of `flatten` for the given ordered shape map; returns fresh contiguous tensors."""
    total = sum(math.prod(s) for s in shapes.values())
    if total != flat.numel():
        raise ConfigError(f"flat vector has {flat.numel()} values, shapes need {total}")
    out: Params = {}
    offset = 0
    for name, shape in shapes.items():
        n = math.prod(shape)
        out[name] = flat[offset : offset + n].reshape(shape).clone()
        offset += n
    return out
