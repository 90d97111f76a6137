"""`[training.model]`: field overrides on the model preset, as the run computes with them.

Each key is a `ModelConfig` (or `LlamaConfig`) field; `family = "llama"` (or `"gpt"`) switches
the class, keeping the preset's shared dimensions. Values are coerced to the field's type, so
`rope_theta = 10000` and `rope_theta = 10000.0` give one config and one config hash.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping

from protocol.core.errors import ConfigError
from protocol.core.model.config import LlamaConfig, ModelConfig

FAMILIES: dict[str, type[ModelConfig]] = {"gpt": ModelConfig, "llama": LlamaConfig}
Override = float | int | bool | str


def family_of(cfg: ModelConfig) -> str:
    return "llama" if isinstance(cfg, LlamaConfig) else "gpt"


def apply_overrides(base: ModelConfig, overrides: Mapping[str, Override]) -> ModelConfig:
    """`base` with `overrides` applied (unknown keys and wrong types raise ConfigError)."""
    family = overrides.get("family", family_of(base))
    if family not in FAMILIES:
        raise ConfigError(f"[training.model] family {family!r} is not one of {sorted(FAMILIES)}")
    cls = FAMILIES[str(family)]
    types = _field_types(cls)
    unknown = sorted(set(overrides) - set(types) - {"family"})
    if unknown:
        raise ConfigError(f"[training.model] has unknown keys for a {family} model: {unknown}")
    given = {k: _coerce(k, v, types[k]) for k, v in overrides.items() if k != "family"}
    if cls is type(base):
        return dataclasses.replace(base, **given)  # type: ignore[arg-type]
    # another family: the preset's dimensions carry over, its biases (GPT-only) do not
    shared = {k: getattr(base, k) for k in ("vocab_size", "block_size", "n_layer", "n_head", "n_embd")}
    return cls(**{**shared, **given})  # type: ignore[arg-type]


def _field_types(cls: type[ModelConfig]) -> dict[str, type]:
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls)}


def _coerce(key: str, value: Override, want: type) -> Override:
    """TOML's int for a float field becomes a float; anything else of the wrong type is refused
    (a bool is not an int here, though Python says it is)."""
    if want is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if type(value) is not want:
        raise ConfigError(f"[training.model] {key} must be of type {want.__name__}, got {value!r}")
    return value
