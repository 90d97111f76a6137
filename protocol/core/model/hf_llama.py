"""The Hugging Face Llama layout, mapped onto our Llama (pure: dicts and tensors, no files).

`protocol/config/hf_checkpoint.py` reads and writes the folders (`config.json`,
`*.safetensors`); this module turns their content into a `LlamaConfig` and our parameter
names, and back. Only what our decoder computes is accepted: a config asking for rotary
scaling, attention or MLP biases, another activation or another head size is refused with
the key that differs, never silently approximated.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from torch import Tensor

from protocol.core.errors import ConfigError
from protocol.core.model.gpt import LlamaConfig, Params, param_shapes

# our per-layer names -> Hugging Face's, under "model.layers.{i}."
_LAYER = {"attn_norm.weight": "input_layernorm.weight", "mlp_norm.weight": "post_attention_layernorm.weight",
          **{f"attn.{p}.weight": f"self_attn.{p}.weight" for p in ("q_proj", "k_proj", "v_proj", "o_proj")},
          **{f"mlp.{p}.weight": f"mlp.{p}.weight" for p in ("gate_proj", "up_proj", "down_proj")}}


class HfCheckpointError(ConfigError):
    """Raised when a Hugging Face folder is not a Llama checkpoint this decoder reproduces."""


def config_from_hf(hf: Mapping[str, Any], block_size: int | None = None) -> LlamaConfig:
    """Our config of a Hugging Face `config.json` (as a dict); `block_size` defaults to its
    `max_position_embeddings`."""
    if hf.get("model_type") != "llama":
        raise HfCheckpointError(f"config.json model_type is {hf.get('model_type')!r}, not 'llama'")
    unsupported = {"rope_scaling": None, "attention_bias": False, "mlp_bias": False, "hidden_act": "silu"}
    for key, want in unsupported.items():
        if hf.get(key, want) != want:
            raise HfCheckpointError(f"config.json {key} = {hf[key]!r} is not supported (only {want!r})")
    heads, width = int(hf["num_attention_heads"]), int(hf["hidden_size"])
    if hf.get("head_dim", width // heads) != width // heads:
        raise HfCheckpointError(f"config.json head_dim = {hf['head_dim']} is not hidden_size / num_attention_heads")
    try:
        return LlamaConfig(
            vocab_size=int(hf["vocab_size"]), block_size=int(block_size or hf["max_position_embeddings"]),
            n_layer=int(hf["num_hidden_layers"]), n_head=heads, n_embd=width,
            n_kv_head=int(hf.get("num_key_value_heads") or heads), intermediate_size=int(hf["intermediate_size"]),
            rope_theta=float(hf.get("rope_theta", 10000.0)), norm_eps=float(hf.get("rms_norm_eps", 1e-6)),
            tie_embeddings=bool(hf.get("tie_word_embeddings", False)))
    except KeyError as exc:
        raise HfCheckpointError(f"config.json lacks {exc.args[0]}") from exc


def config_to_hf(cfg: LlamaConfig) -> dict[str, Any]:
    """The `config.json` content Hugging Face's `LlamaForCausalLM` loads for `cfg`."""
    return {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "torch_dtype": "float32",
            "vocab_size": cfg.vocab_size, "hidden_size": cfg.n_embd, "intermediate_size": cfg.hidden,
            "num_hidden_layers": cfg.n_layer, "num_attention_heads": cfg.n_head,
            "num_key_value_heads": cfg.kv_heads, "max_position_embeddings": cfg.block_size,
            "rms_norm_eps": cfg.norm_eps, "rope_theta": cfg.rope_theta, "tie_word_embeddings": cfg.tie_embeddings,
            "hidden_act": "silu", "attention_bias": False, "mlp_bias": False, "rope_scaling": None}


def hf_names(cfg: LlamaConfig) -> dict[str, str]:
    """Our parameter name -> the Hugging Face tensor name (by layer; `param_shapes` gives our order)."""
    out = {"tok_emb.weight": "model.embed_tokens.weight"}
    for i in range(cfg.n_layer):
        out |= {f"layers.{i}.{ours}": f"model.layers.{i}.{theirs}" for ours, theirs in _LAYER.items()}
    out["norm.weight"] = "model.norm.weight"
    if not cfg.tie_embeddings:
        out["lm_head.weight"] = "lm_head.weight"
    return out


def params_from_hf(cfg: LlamaConfig, tensors: Mapping[str, Tensor]) -> Params:
    """Our global state from a checkpoint's tensors (float32, contiguous), each checked
    against the shape `cfg` gives it, in our parameter order (the order `flatten` uses).
    Extra tensors (rotary caches) are ignored."""
    shapes, names, out = param_shapes(cfg), hf_names(cfg), {}
    for ours in shapes:
        theirs = names[ours]
        if theirs not in tensors:
            raise HfCheckpointError(f"checkpoint lacks tensor {theirs}")
        t = tensors[theirs]
        if tuple(t.shape) != shapes[ours]:
            raise HfCheckpointError(f"tensor {theirs} has shape {tuple(t.shape)}, config.json gives {shapes[ours]}")
        out[ours] = t.float().contiguous()
    return out


def params_to_hf(cfg: LlamaConfig, params: Params) -> dict[str, Tensor]:
    """The checkpoint tensors of our global state."""
    return {theirs: params[ours].contiguous() for ours, theirs in hf_names(cfg).items()}
