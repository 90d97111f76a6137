"""A run that starts from a Hugging Face Llama checkpoint (`[training.genesis]`), and the
`[training.model]` overrides on the preset (a tiny random `transformers` model, no hub access)."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch
from safetensors.torch import load_file, save_file

from protocol.config.hf_checkpoint import load_hf_llama
from protocol.config.run_config import RunConfig
from protocol.config.run_setup import (
    Setup,
    TrainingSpec,
    check_genesis_present,
    check_local,
    resolve,
    training_spec,
)
from protocol.config.run_state import pinned_hashes, with_hf_genesis
from protocol.core.aggregation.state import decode_state, genesis_state, global_state_hash
from protocol.core.errors import ConfigError
from protocol.core.model.gpt import (
    LlamaConfig,
    ModelConfig,
    build_model,
    config_hash,
    load_params,
    preset,
)
from protocol.core.model.hf_llama import HfCheckpointError
from protocol.node.global_model import genesis_blob
from protocol.node.pinning import prepare
from tests.hf_models import tiny_hf

transformers = pytest.importorskip("transformers")  # a dev dependency: installed wherever tests run

COMPUTE = {"inner_steps": 6, "outer_momentum": 0.9}  # momentum: the state holds a zero buffer too




def genesis_config(folder, **model) -> RunConfig:
    base = RunConfig(training={"preset": "micro", "compute": COMPUTE, **({"model": model} if model else {})})
    return with_hf_genesis(base, folder)


def test_deploy_pins_the_checkpoints_state_and_it_computes_transformers_logits(tmp_path):
    theirs = tiny_hf(tmp_path / "ckpt")
    deployed = prepare(genesis_config(tmp_path / "ckpt"))  # in a profile worker, as deploy does
    spec = training_spec(deployed)
    assert spec.genesis is not None and spec.genesis.path == str((tmp_path / "ckpt").resolve())
    model = resolve(deployed).model
    cfg, params = load_hf_llama(tmp_path / "ckpt")
    assert model == cfg and spec.model_config_hash == config_hash(cfg).hex()
    expected = genesis_state(model, Setup(spec, b"").compute, params=params)
    assert deployed.genesis_model_hash == global_state_hash(expected, model).hex()
    assert deployed.genesis_model_hash != global_state_hash(genesis_state(model, Setup(spec, b"").compute), model).hex()

    blob, state_hash = genesis_blob(spec)  # what a node serves as round 0's model
    assert state_hash.hex() == deployed.genesis_model_hash
    ours = build_model(model)
    load_params(ours, decode_state(blob, model, state_hash).params)
    idx = torch.randint(0, 256, (2, 24), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        want, got = theirs(idx).logits, ours.logits(idx)
    assert torch.allclose(got, want, atol=1e-5, rtol=1e-5), float((got - want).abs().max())
    check_local(deployed, pinned_hashes(spec))  # this node's copy is the run's


def test_a_node_without_the_checkpoint_is_told_before_any_hashing(tmp_path):
    tiny_hf(tmp_path / "ckpt")
    config = genesis_config(tmp_path / "ckpt")
    (tmp_path / "ckpt" / "config.json").rename(tmp_path / "elsewhere.json")
    spec = training_spec(config)
    for step in (lambda: check_genesis_present(spec), lambda: pinned_hashes(spec), lambda: prepare(config)):
        with pytest.raises(ConfigError, match=r"genesis checkpoint .*ckpt \(\[training.genesis\]\) is missing on this node"):
            step()


def test_a_local_copy_with_other_weights_or_another_config_is_refused(tmp_path):
    tiny_hf(tmp_path / "ckpt")
    deployed = prepare(genesis_config(tmp_path / "ckpt"))
    spec = training_spec(deployed)
    (shard,) = (tmp_path / "ckpt").glob("*.safetensors")
    tensors = load_file(str(shard))
    tensors["model.norm.weight"] = tensors["model.norm.weight"] + 1e-3
    save_file(tensors, str(shard), metadata={"format": "pt"})
    with pytest.raises(ConfigError, match="copy of the genesis checkpoint .* is not the run's"):
        check_local(deployed, pinned_hashes(spec))

    hf = json.loads((tmp_path / "ckpt" / "config.json").read_text())
    (tmp_path / "ckpt" / "config.json").write_text(json.dumps({**hf, "rms_norm_eps": 1e-6}))
    with pytest.raises(HfCheckpointError, match=r"not the run's model \(\[training.model\]\): norm_eps 1e-06 vs 1e-05"):
        pinned_hashes(spec)


def test_the_context_length_may_be_shorter_than_the_checkpoints_and_nothing_else_may_differ(tmp_path):
    tiny_hf(tmp_path / "ckpt")
    spec = training_spec(genesis_config(tmp_path / "ckpt", block_size=16))
    assert Setup(spec, b"").model.block_size == 16
    assert len(pinned_hashes(spec)["genesis_model_hash"]) == 64
    with pytest.raises(ConfigError, match=r"disagrees with the genesis checkpoint .*: n_layer = 3 \(checkpoint: 2\)"):
        genesis_config(tmp_path / "ckpt", n_layer=3)
    gpt = TrainingSpec.model_validate({**spec.model_dump(), "model": {**spec.model, "family": "gpt", "bias": False}})
    with pytest.raises(ConfigError, match="unknown keys for a gpt model"):
        pinned_hashes(gpt)  # a GPT has no n_kv_head; and no GPT loads from a Llama checkpoint


def test_model_overrides_apply_to_the_preset_and_a_family_switch_builds_its_class():
    def model(preset_name: str, **table) -> ModelConfig:
        return Setup(TrainingSpec(preset=preset_name, model=table), b"").model

    assert model("micro", vocab_size=8000) == dataclasses.replace(preset("micro"), vocab_size=8000)
    llama = model("micro", family="llama", n_kv_head=1)
    assert type(llama) is LlamaConfig and (llama.n_embd, llama.n_layer, llama.bias, llama.kv_heads) == (32, 2, False, 1)
    assert type(model("llama-micro", family="gpt")) is ModelConfig
    # TOML's integer for a float field is the same config, and the same hash
    assert config_hash(model("llama-micro", rope_theta=10000)) == config_hash(preset("llama-micro"))


@pytest.mark.parametrize("table,message", [
    ({"n_layers": 3, "vocab": 9}, r"unknown keys for a gpt model: \['n_layers', 'vocab'\]"),
    ({"n_kv_head": 2}, r"unknown keys for a gpt model: \['n_kv_head'\]"),
    ({"n_layer": True}, "n_layer must be of type int, got True"),
    ({"n_layer": 2.5}, "n_layer must be of type int, got 2.5"),
    ({"family": "mamba"}, "family 'mamba' is not one of"),
    ({"n_embd": 31}, "n_embd must be divisible by n_head"),
])
def test_bad_model_overrides_are_refused_with_the_key(table, message):
    with pytest.raises(ConfigError, match=message):
        _ = Setup(TrainingSpec(preset="micro", model=table), b"").model


def test_a_checkpoint_genesis_needs_a_llama_model(tmp_path):
    tiny_hf(tmp_path / "ckpt")
    spec = TrainingSpec(preset="micro", genesis={"path": str(tmp_path / "ckpt")})
    with pytest.raises(HfCheckpointError, match="needs a Llama model"):
        pinned_hashes(spec)


def test_deploy_genesis_writes_both_tables_and_pins_the_checkpoints_hash(tmp_path):
    from typer.testing import CliRunner

    from protocol.chain.deployment import load_deployment
    from protocol.cli.app import app

    tiny_hf(tmp_path / "ckpt")
    (tmp_path / "run.toml").write_text('[training]\npreset = "micro"\n[training.model]\nblock_size = 16\n')
    args = ["deploy", "--rpc", "embedded", "--dev-account", "--out", str(tmp_path / "dep.json"),
            "--config", str(tmp_path / "run.toml"), "--genesis", str(tmp_path / "ckpt")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "genesis: the Hugging Face Llama checkpoint in" in result.stderr
    training = load_deployment(tmp_path / "dep.json").run_config.training
    assert training["genesis"] == {"path": str((tmp_path / "ckpt").resolve()), "format": "hf-llama"}
    assert training["model"]["family"] == "llama" and training["model"]["block_size"] == 16
    spec = TrainingSpec.model_validate(training)
    assert load_deployment(tmp_path / "dep.json").run_config.genesis_model_hash == genesis_blob(spec)[1].hex()

    missing = CliRunner().invoke(app, [*args[:-1], str(tmp_path / "missing")])
    assert missing.exit_code == 1, missing.output
    assert missing.stderr.strip().splitlines()[-1] == f"error: {tmp_path / 'missing'} has no config.json " \
                                                      "(a Hugging Face checkpoint folder)"


def test_a_model_smaller_than_the_corpus_vocabulary_is_refused_at_pinning() -> None:
    from protocol.config.run_setup import DatasetSpec, check_vocabulary

    with pytest.raises(ConfigError, match=r"vocab_size 200 is smaller than the corpus's 320 .*vocab_size = 320"):
        check_vocabulary(200, 320, DatasetSpec(source="packed", path="/x/corpus.bin"))
    with pytest.raises(ConfigError, match="byte corpora need vocab_size >= 256"):
        check_vocabulary(128, 256, DatasetSpec())
    check_vocabulary(320, 320, DatasetSpec())  # equal is enough
