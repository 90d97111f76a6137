"""The model configs, their presets and hash, and the parameter layout they imply, without torch.

A `ModelConfig` (nanoGPT-style GPT) or `LlamaConfig` (protocol/core/model/llama.py) names a
model; `config_hash` goes on chain at deploy. `layout` gives each parameter's name and shape
in `named_parameters()` order, worked out from the config alone, so the run config, the chain
and the blob caps (protocol/core/wire/blob_caps.py) size a run without loading torch; the
models themselves are in protocol/core/model/gpt.py, and tests/core/test_torch_free.py checks
`layout` against the built model's own parameters for every preset.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass

from protocol.core.crypto.hashing import Digest, blake3_hash
from protocol.core.errors import ConfigError


@dataclass(frozen=True)
class ModelConfig:
    vocab_size: int = 256  # byte-level tokens
    block_size: int = 128  # context length in tokens
    n_layer: int = 4  # transformer blocks
    n_head: int = 4  # attention heads per block
    n_embd: int = 128  # residual stream width
    bias: bool = True  # biases in Linear and LayerNorm, as in GPT-2
    # residual dropout of GPT blocks; its masks come from the trace's generator (0 in every preset)
    dropout: float = 0.0

    def __post_init__(self) -> None:
        if self.n_embd % self.n_head:
            raise ConfigError("n_embd must be divisible by n_head")
        if not 0.0 <= self.dropout < 1.0:
            raise ConfigError("dropout must be in [0, 1)")
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
        if self.family != "llama" or self.bias or self.dropout:
            raise ConfigError("a LlamaConfig has family 'llama', no biases and no dropout")
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
    fields = asdict(cfg)
    if not fields["dropout"]:  # added later: left out at its default, so every earlier config keeps its hash
        del fields["dropout"]
    return blake3_hash("model-config", json.dumps(fields, sort_keys=True).encode())


Shapes = dict[str, tuple[int, ...]]  # parameter name -> shape, in named_parameters() order


def layout(cfg: ModelConfig) -> Shapes:
    """Every parameter's name and shape, as `gpt.build_model(cfg).named_parameters()` lists them."""
    return _llama_layout(cfg) if isinstance(cfg, LlamaConfig) else _gpt_layout(cfg)


def layout_size(cfg: ModelConfig) -> int:
    """The number of parameters (`gpt.num_params`)."""
    return sum(math.prod(s) for s in layout(cfg).values())


def _linear(name: str, n_in: int, n_out: int, bias: bool) -> Shapes:
    return {f"{name}.weight": (n_out, n_in), **({f"{name}.bias": (n_out,)} if bias else {})}


def _layer_norm(name: str, width: int, bias: bool) -> Shapes:
    return {f"{name}.weight": (width,), **({f"{name}.bias": (width,)} if bias else {})}


def _gpt_layout(cfg: ModelConfig) -> Shapes:
    c, b = cfg.n_embd, cfg.bias
    out: Shapes = {"wte.weight": (cfg.vocab_size, c), "wpe.weight": (cfg.block_size, c)}
    for i in range(cfg.n_layer):
        h = f"h.{i}"
        out |= _layer_norm(f"{h}.ln_1", c, b)
        out |= _linear(f"{h}.attn.c_attn", c, 3 * c, b) | _linear(f"{h}.attn.c_proj", c, c, b)
        out |= _layer_norm(f"{h}.ln_2", c, b)
        out |= _linear(f"{h}.mlp.c_fc", c, 4 * c, b) | _linear(f"{h}.mlp.c_proj", 4 * c, c, b)
    return out | _layer_norm("ln_f", c, b) | {"lm_head.weight": (cfg.vocab_size, c)}


def _llama_layout(cfg: LlamaConfig) -> Shapes:
    c, hs = cfg.n_embd, cfg.n_embd // cfg.n_head
    out: Shapes = {"tok_emb.weight": (cfg.vocab_size, c)}
    for i in range(cfg.n_layer):
        layer = f"layers.{i}"
        out[f"{layer}.attn_norm.weight"] = (c,)
        for proj, width in (("q_proj", cfg.n_head * hs), ("k_proj", cfg.kv_heads * hs), ("v_proj", cfg.kv_heads * hs)):
            out[f"{layer}.attn.{proj}.weight"] = (width, c)
        out[f"{layer}.attn.o_proj.weight"] = (c, cfg.n_head * hs)
        out[f"{layer}.mlp_norm.weight"] = (c,)
        out |= {f"{layer}.mlp.gate_proj.weight": (cfg.hidden, c), f"{layer}.mlp.up_proj.weight": (cfg.hidden, c),
                f"{layer}.mlp.down_proj.weight": (c, cfg.hidden)}
    out["norm.weight"] = (c,)
    return out if cfg.tie_embeddings else out | {"lm_head.weight": (cfg.vocab_size, c)}
