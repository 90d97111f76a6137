"""The model families, built from a frozen config: a nanoGPT-style byte-level GPT (vocab 256)
here, and a Llama-style decoder in `protocol/core/model/llama.py` (`LlamaConfig` presets below).

Weights are *not* tied (safetensors refuses shared storage, and the global state is a flat
list of independent tensors). Dropout is 0 in every preset, so a forward pass draws no
random numbers. Parameter order is `named_parameters()` order, fixed by this code, and
`flatten`/`unflatten` use it for the flat vectors that compression and aggregation see.
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import asdict, dataclass

import blake3
import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from protocol.core.crypto.hashing import Digest, blake3_hash
from protocol.core.errors import ConfigError

Params = dict[str, Tensor]  # ordered name -> tensor, in named_parameters() order


@dataclass(frozen=True)
class ModelConfig:
    vocab_size: int = 256  # byte-level tokens
    block_size: int = 128  # context length in tokens
    n_layer: int = 4  # transformer blocks
    n_head: int = 4  # attention heads per block
    n_embd: int = 128  # residual stream width
    bias: bool = True  # biases in Linear and LayerNorm, as in GPT-2

    def __post_init__(self) -> None:
        if self.n_embd % self.n_head:
            raise ConfigError("n_embd must be divisible by n_head")
        if min(self.vocab_size, self.block_size, self.n_layer, self.n_head) <= 0:
            raise ConfigError("model dimensions must be positive")


@dataclass(frozen=True)
class LlamaConfig(ModelConfig):
    """A Llama-style decoder (protocol/core/model/llama.py): RMSNorm, rotary embeddings, SwiGLU,
    grouped-query attention when `n_kv_head` < `n_head`, tied embeddings optional. No biases
    and no learned positions. `family` is in the config (and its hash), so it is never mistaken
    for a GPT of the same dimensions."""

    family: str = "llama"
    bias: bool = False
    n_kv_head: int = 0  # key/value heads; 0 = n_head (no grouping)
    intermediate_size: int = 0  # SwiGLU hidden width; 0 = 8/3 x n_embd rounded up to a multiple of 32
    rope_theta: float = 10000.0  # rotary base
    norm_eps: float = 1e-5  # RMSNorm epsilon
    tie_embeddings: bool = False  # lm_head shares the token embedding

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.family != "llama" or self.bias:
            raise ConfigError("a LlamaConfig has family 'llama' and no biases")
        if self.n_head % self.kv_heads or (self.n_embd // self.n_head) % 2:
            raise ConfigError("n_head must be a multiple of n_kv_head, and the head size even (rotary pairs)")
        if self.intermediate_size < 0 or self.rope_theta <= 0 or self.norm_eps <= 0:
            raise ConfigError("intermediate_size, rope_theta and norm_eps must be positive (0: the default width)")

    @property
    def kv_heads(self) -> int:
        return self.n_kv_head or self.n_head

    @property
    def hidden(self) -> int:
        return self.intermediate_size or -(-8 * self.n_embd // 3 // 32) * 32


PRESETS: dict[str, ModelConfig] = {
    # tests: ~42k params, a training step takes a few ms on one core
    "micro": ModelConfig(block_size=32, n_layer=2, n_head=2, n_embd=32),
    # ~0.86M params: trains usefully on 2 CPU cores
    "tiny": ModelConfig(block_size=128, n_layer=4, n_head=4, n_embd=128),
    # ~10.8M params: a small GPU or a patient CPU
    "small": ModelConfig(block_size=256, n_layer=6, n_head=6, n_embd=384),
    # GPT-2 small shape (124M with the BPE vocab; ~86M with 256 byte tokens)
    "gpt2": ModelConfig(block_size=1024, n_layer=12, n_head=12, n_embd=768),
    # Llama-style (byte vocab unless a tokenizer sets vocab_size): tests, CPUs, then GPUs
    "llama-micro": LlamaConfig(block_size=32, n_layer=2, n_head=4, n_kv_head=2, n_embd=32),
    "llama-tiny": LlamaConfig(block_size=128, n_layer=4, n_head=4, n_kv_head=2, n_embd=128),
    "llama-small": LlamaConfig(block_size=256, n_layer=6, n_head=6, n_kv_head=2, n_embd=384),
    # ~125M with a 32k vocabulary; ~1.1B (TinyLlama's shape) needs a GPU: weights, gradients and
    # AdamW state alone take about 16 GB
    "llama-124m": LlamaConfig(vocab_size=32000, block_size=1024, n_layer=12, n_head=12, n_kv_head=4, n_embd=768),
    "llama-1b": LlamaConfig(vocab_size=32000, block_size=2048, n_layer=22, n_head=32, n_kv_head=4, n_embd=2048,
                            intermediate_size=5632),
}


def preset(name: str) -> ModelConfig:
    try:
        return PRESETS[name]
    except KeyError as exc:
        raise ConfigError(f"unknown model preset {name!r}; choose from {sorted(PRESETS)}") from exc


def config_hash(cfg: ModelConfig) -> Digest:
    """Hash of the canonical JSON of the config (goes on chain at deploy)."""
    return blake3_hash("model-config", json.dumps(asdict(cfg), sort_keys=True).encode())


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

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.attn(self.ln_1(x))  # (B, T, C)
        return x + self.mlp(self.ln_2(x))  # (B, T, C)


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
    with torch.device("meta"):
        model = build_model(cfg)
    return tuple((name, tuple(p.shape)) for name, p in model.named_parameters())


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
