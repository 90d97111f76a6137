"""Hugging Face Llama checkpoint folders on disk: `config.json` and `*.safetensors` (no hub access).

The mapping itself is pure (`protocol/core/hf_llama.py`); here are the reads and writes, with
a clear error for a folder that is missing, unreadable or not a Llama checkpoint.
"""

from __future__ import annotations

import json
from pathlib import Path

from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from torch import Tensor

from protocol.config.atomic import atomic_write
from protocol.core.hf_llama import (
    HfCheckpointError,
    config_from_hf,
    config_to_hf,
    params_from_hf,
    params_to_hf,
)
from protocol.core.model import LlamaConfig, Params


def load_hf_llama(folder: Path, block_size: int | None = None) -> tuple[LlamaConfig, Params]:
    """Our config and global state of the checkpoint in `folder` (every `*.safetensors` shard)."""
    config_file = folder / "config.json"
    if not config_file.is_file():
        raise HfCheckpointError(f"{folder} has no config.json (a Hugging Face checkpoint folder)")
    try:
        hf = json.loads(config_file.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise HfCheckpointError(f"{config_file} is not readable JSON: {exc}") from exc
    cfg = config_from_hf(hf, block_size)
    shards = sorted(folder.glob("*.safetensors"))
    if not shards:
        raise HfCheckpointError(f"{folder} holds no *.safetensors file")
    tensors: dict[str, Tensor] = {}
    for shard in shards:
        try:
            tensors |= load_file(str(shard))
        except (OSError, SafetensorError) as exc:
            raise HfCheckpointError(f"{shard} is not a readable safetensors file: {exc}") from exc
    return cfg, params_from_hf(cfg, tensors)


def save_hf_llama(cfg: LlamaConfig, params: Params, folder: Path) -> list[Path]:
    """Write `config.json` and `model.safetensors` that `transformers` loads; returns the paths."""
    folder.mkdir(parents=True, exist_ok=True)
    weights = folder / "model.safetensors"
    save_file(params_to_hf(cfg, params), str(weights), metadata={"format": "pt"})
    config = folder / "config.json"
    atomic_write(config, json.dumps(config_to_hf(cfg), indent=2, sort_keys=True).encode())
    return [config, weights]
