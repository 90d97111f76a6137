from __future__ import annotations

import pytest
import torch

from protocol.core.errors import ConfigError
from protocol.core.model.gpt import (
    GPT,
    ModelConfig,
    config_hash,
    flatten,
    init_params,
    load_params,
    num_params,
    param_shapes,
    preset,
    unflatten,
)


def test_presets_sizes() -> None:
    assert num_params(preset("micro")) == 42_880
    assert 0.8e6 < num_params(preset("tiny")) < 1.2e6
    assert 80e6 < num_params(preset("gpt2")) < 130e6
    with pytest.raises(ConfigError):
        preset("nope")
    with pytest.raises(ConfigError):
        ModelConfig(n_embd=30, n_head=4)


def test_config_hash_is_stable_and_sensitive() -> None:
    assert config_hash(preset("micro")).hex() == (
        "c66b33ce1ee2e4094c224a4dc6ce152f3d528b08d2668c02bb05561f58bc4b68")
    assert config_hash(preset("micro")) != config_hash(preset("tiny"))


def test_init_is_deterministic_and_seeded() -> None:
    cfg = preset("micro")
    a, b, c = init_params(cfg, 1), init_params(cfg, 1), init_params(cfg, 2)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not torch.equal(flatten(a), flatten(c))
    assert {k: tuple(v.shape) for k, v in a.items()} == param_shapes(cfg)


def test_forward_loss_near_uniform_at_init() -> None:
    cfg = preset("micro")
    model = GPT(cfg)
    load_params(model, init_params(cfg, 0))
    x = torch.randint(0, 256, (2, cfg.block_size))  # (B, T)
    loss = model(x, x).detach()
    assert abs(float(loss) - torch.log(torch.tensor(256.0)).item()) < 0.3


def test_flatten_roundtrip() -> None:
    cfg = preset("micro")
    p = init_params(cfg, 3)
    flat = flatten(p)
    assert flat.shape == (num_params(cfg),)
    q = unflatten(flat, param_shapes(cfg))
    assert all(torch.equal(p[k], q[k]) for k in p)
    with pytest.raises(ConfigError):
        unflatten(flat[:-1], param_shapes(cfg))


def test_the_flat_difference_is_the_difference_of_the_flat_vectors_bit_for_bit() -> None:
    from protocol.core.model.gpt import flat_difference, flatten, init_params, preset

    a, b = init_params(preset("micro"), 0), init_params(preset("micro"), 1)
    assert torch.equal(flat_difference(a, b), flatten(a) - flatten(b))
