"""The Llama-style decoder: presets, determinism, replay through the protocol, and Hugging Face
checkpoints in and out (a tiny random `transformers` model, no hub access)."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from protocol.config.hf_checkpoint import load_hf_llama, save_hf_llama
from protocol.core.errors import ConfigError
from protocol.core.model.gpt import (
    GPT,
    LlamaConfig,
    build_model,
    config_hash,
    init_params,
    load_params,
    num_params,
    preset,
)
from protocol.core.model.hf_llama import HfCheckpointError
from protocol.core.model.llama import Llama
from tests import hf_models

transformers = pytest.importorskip("transformers")  # a dev dependency: installed wherever tests run


def tiny_hf(tmp_path, **overrides):
    return hf_models.tiny_hf(tmp_path, vocab_size=97, **overrides)


def test_presets_build_their_family_and_the_family_is_in_the_hash():
    assert isinstance(build_model(preset("llama-micro")), Llama) and isinstance(build_model(preset("micro")), GPT)
    gpt_shaped = LlamaConfig(block_size=32, n_layer=2, n_head=2, n_embd=32)
    assert config_hash(gpt_shaped) != config_hash(preset("micro"))
    assert 0.9e9 < num_params(preset("llama-1b")) < 1.2e9 and 1.1e8 < num_params(preset("llama-124m")) < 1.3e8
    with pytest.raises(ConfigError, match="multiple of n_kv_head"):
        LlamaConfig(n_head=4, n_kv_head=3)


def test_tied_embeddings_are_one_tensor_in_the_state():
    cfg = LlamaConfig(block_size=16, n_layer=1, n_head=2, n_embd=16, tie_embeddings=True)
    names = list(init_params(cfg, 0))
    assert "lm_head.weight" not in names and "tok_emb.weight" in names


def test_training_is_deterministic_and_seeded():
    cfg = preset("llama-micro")
    x = torch.randint(0, 256, (2, 16), generator=torch.Generator().manual_seed(1))
    losses = []
    for seed in (0, 0, 1):
        model = build_model(cfg)
        load_params(model, init_params(cfg, seed))
        loss = model(x, x)
        loss.backward()
        losses.append((float(loss.detach()), float(model.tok_emb.weight.grad.abs().sum())))
    assert losses[0] == losses[1] != losses[2]


def test_a_hugging_face_checkpoint_loads_as_genesis_with_the_same_logits(tmp_path):
    theirs = tiny_hf(tmp_path)
    cfg, params = load_hf_llama(tmp_path)
    assert (cfg.vocab_size, cfg.n_kv_head, cfg.hidden, cfg.block_size) == (97, 2, 56, 24)
    ours = build_model(cfg)
    load_params(ours, params)
    idx = torch.randint(0, 97, (2, 24), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        want, got = theirs(idx).logits, ours.logits(idx)
    assert torch.allclose(got, want, atol=1e-5, rtol=1e-5), float((got - want).abs().max())


def test_an_exported_model_loads_in_transformers(tmp_path):
    cfg = preset("llama-micro")
    params = init_params(cfg, 3)
    save_hf_llama(cfg, params, tmp_path / "out")
    theirs = transformers.LlamaForCausalLM.from_pretrained(tmp_path / "out").eval()
    ours = build_model(cfg)
    load_params(ours, params)
    idx = torch.randint(0, 256, (1, 32), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        assert torch.allclose(ours.logits(idx), theirs(idx).logits, atol=1e-5, rtol=1e-5)
    back_cfg, back = load_hf_llama(tmp_path / "out")
    # the default SwiGLU width comes back written out; everything else is the same config
    assert back_cfg == dataclasses.replace(cfg, intermediate_size=cfg.hidden)
    assert all(torch.equal(back[k], params[k]) for k in params)


def test_a_checkpoint_the_decoder_cannot_reproduce_is_refused(tmp_path):
    tiny_hf(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    for key, value in (("attention_bias", True), ("hidden_act", "gelu"), ("model_type", "mistral")):
        (tmp_path / "config.json").write_text(json.dumps({**config, key: value}))
        with pytest.raises(HfCheckpointError, match=key if key != "model_type" else "not 'llama'"):
            load_hf_llama(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps(config))
    for shard in tmp_path.glob("*.safetensors"):
        shard.write_bytes(b"not safetensors")
    with pytest.raises(HfCheckpointError, match="not a readable safetensors"):
        load_hf_llama(tmp_path)
    with pytest.raises(HfCheckpointError, match="no config.json"):
        load_hf_llama(tmp_path / "missing")


def test_a_llama_miners_round_verifies_bit_for_bit_and_a_forged_segment_does_not(profile, ds):
    from fixtures_training import task

    from protocol.core.proof.submission import honest
    from protocol.core.proof.trace import zero_carry_hash
    from protocol.core.proof.verdict import judge, verify_submission

    cfg = preset("llama-micro")
    t, theta = task(5, model=cfg), init_params(cfg, 0)
    sub = honest(t, ds, theta, None)

    def verdict(segments: tuple[int, ...], trace=None) -> str | None:
        v = verify_submission(t, ds, theta, bytes(zero_carry_hash(cfg)), sub.root, trace or sub.trace, sub.blob,
                              lambda leaf: sub.fetch(leaf, t), segments, profile)
        return judge(v).kind

    assert verdict((0, 1, 2)) is None  # every segment replays to the committed bits
    forged = dataclasses.replace(sub.trace, losses=(sub.trace.losses[0] + 1e-3, *sub.trace.losses[1:]))
    assert verdict((0,), forged) is not None
