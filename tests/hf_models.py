"""A tiny random Hugging Face Llama saved to a folder: what genesis, export and logits tests load."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch


def tiny_hf(folder: Path, vocab_size: int = 256, **overrides: Any) -> Any:
    """`transformers.LlamaForCausalLM` (2 layers, width 32, grouped-query attention), seeded,
    saved to `folder` with `save_pretrained` and returned in eval mode."""
    import transformers  # a dev dependency: installed wherever tests run

    cfg = transformers.LlamaConfig(vocab_size=vocab_size, hidden_size=32, intermediate_size=56, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=24,
                                   rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=False, **overrides)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(cfg).eval()
    model.save_pretrained(folder)
    return model
