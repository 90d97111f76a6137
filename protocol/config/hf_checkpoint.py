"""Hugging Face Llama checkpoint folders on disk: `config.json` and `*.safetensors` (no hub access).

The mapping itself is pure (`protocol/core/model/hf_llama.py`); here are the reads and writes, with
a clear error for a folder that is missing, unreadable or not a Llama checkpoint, and the
genesis check: a run that starts from a checkpoint (`[training.genesis]`) takes its θ only
when the folder's `config.json` gives exactly the run's model.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from torch import Tensor

from protocol.config.atomic import atomic_write
from protocol.core.model.gpt import LlamaConfig, ModelConfig, Params
from protocol.core.model.hf_llama import (
    HfCheckpointError,
    config_from_hf,
    config_to_hf,
    params_from_hf,
    params_to_hf,
)


def read_hf_config(folder: Path) -> dict[str, Any]:
    """The folder's `config.json`, as a dict."""
    config_file = folder / "config.json"
    if not config_file.is_file():
        raise HfCheckpointError(f"{folder} has no config.json (a Hugging Face checkpoint folder)")
    try:
        hf = json.loads(config_file.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise HfCheckpointError(f"{config_file} is not readable JSON: {exc}") from exc
    if not isinstance(hf, dict):
        raise HfCheckpointError(f"{config_file} is not a JSON object")
    return hf


def load_hf_llama(folder: Path, block_size: int | None = None) -> tuple[LlamaConfig, Params]:
    """Our config and global state of the checkpoint in `folder` (every `*.safetensors` shard)."""
    cfg = config_from_hf(read_hf_config(folder), block_size)
    return cfg, params_from_hf(cfg, _read_tensors(folder))


def _read_tensors(folder: Path) -> dict[str, Tensor]:
    shards = sorted(folder.glob("*.safetensors"))
    if not shards:
        raise HfCheckpointError(f"{folder} holds no *.safetensors file")
    tensors: dict[str, Tensor] = {}
    for shard in shards:
        try:
            tensors |= load_file(str(shard))
        except (OSError, SafetensorError) as exc:
            raise HfCheckpointError(f"{shard} is not a readable safetensors file: {exc}") from exc
    return tensors


def save_hf_llama(cfg: LlamaConfig, params: Params, folder: Path) -> list[Path]:
    """Write `config.json` and `model.safetensors` that `transformers` loads; returns the paths."""
    folder.mkdir(parents=True, exist_ok=True)
    weights = folder / "model.safetensors"
    save_file(params_to_hf(cfg, params), str(weights), metadata={"format": "pt"})
    config = folder / "config.json"
    atomic_write(config, json.dumps(config_to_hf(cfg), indent=2, sort_keys=True).encode())
    return [config, weights]


def genesis_model(folder: Path, block_size: int | None = None) -> dict[str, Any]:
    """The `[training.model]` table (every field) of the checkpoint in `folder`; `block_size`
    (the training context) defaults to its `max_position_embeddings`."""
    return dataclasses.asdict(config_from_hf(read_hf_config(folder), block_size))


def load_genesis(folder: Path, model: ModelConfig) -> Params:
    """θ of the run's genesis checkpoint, refused unless its `config.json` gives `model` (the
    run's `[training.model]`). Only the context length may differ: rotary positions have no
    weights, so a run may train on a shorter context than the checkpoint's."""
    if not isinstance(model, LlamaConfig):
        raise HfCheckpointError('[training.genesis] format "hf-llama" needs a Llama model '
                                '([training.model] family = "llama")')
    cfg = config_from_hf(read_hf_config(folder), model.block_size)
    differ = [f.name for f in dataclasses.fields(cfg) if _field(cfg, f.name) != _field(model, f.name)]
    if differ:
        detail = ", ".join(f"{k} {_field(cfg, k)!r} vs {_field(model, k)!r}" for k in differ)
        raise HfCheckpointError(f"genesis checkpoint {folder} is not the run's model ([training.model]): {detail}")
    return params_from_hf(cfg, _read_tensors(folder))


def _field(cfg: LlamaConfig, name: str) -> object:
    # 0 means the default (width, head count): compare what the decoder computes with
    return {"intermediate_size": cfg.hidden, "n_kv_head": cfg.kv_heads}.get(name, getattr(cfg, name))
