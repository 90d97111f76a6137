"""`veritrain export`: a round's attested model, out of a node's data dir, loads in `transformers`
with the logits our decoder computes on the same state."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from protocol.chain.deployment import ContractAddresses, Deployment, save_deployment
from protocol.cli.app import app
from protocol.cli.export import ExportError, attested_model, export_state
from protocol.config.run_config import RunConfig
from protocol.config.run_setup import Setup, TrainingSpec
from protocol.core.aggregation.state import decode_state
from protocol.core.model.gpt import build_model, load_params, preset
from protocol.core.pipeline.staged_bundle import decode_model
from protocol.core.pipeline.staged_state import read_stage_index
from protocol.node.global_model import genesis_blob
from protocol.node.staged_store import keep_bundle
from protocol.node.store import DataDir

transformers = pytest.importorskip("transformers")  # a dev dependency: installed wherever tests run

LLAMA = TrainingSpec(preset="llama-micro", compute={"outer_momentum": 0.9})  # the state carries momentum too


def assert_same_logits(folder: Path, model, params) -> None:
    theirs = transformers.LlamaForCausalLM.from_pretrained(folder).eval()
    ours = build_model(model)
    load_params(ours, params)
    idx = torch.randint(0, model.vocab_size, (2, model.block_size), generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        want, got = theirs(idx).logits, ours.logits(idx)
    assert torch.allclose(got, want, atol=1e-5, rtol=1e-5), float((got - want).abs().max())


def test_a_held_global_state_exports_to_a_folder_transformers_loads(tmp_path):
    blob, state_hash = genesis_blob(LLAMA)
    DataDir(tmp_path / "node").blobs.put(blob)
    model = Setup(LLAMA, b"").model
    written = export_state(model, state_hash, tmp_path / "node", tmp_path / "hf")
    assert sorted(p.name for p in written) == ["config.json", "model.safetensors"]
    assert_same_logits(tmp_path / "hf", model, decode_state(blob, model, state_hash).params)


def test_a_staged_runs_model_exports_from_its_stage_index_and_stage_blobs(tmp_path):
    spec = TrainingSpec(preset="llama-micro", stages=2, model={"tie_embeddings": False},
                        compute={"outer_momentum": 0.9})
    setup = Setup(spec, b"")
    bundle, model_hash = genesis_blob(spec)
    blobs = DataDir(tmp_path / "node").blobs
    keep_bundle(blobs, bundle, setup.stage_split, model_hash)  # as a validator keeps a staged θ
    export_state(setup.model, model_hash, tmp_path / "node", tmp_path / "hf", setup.stage_split)
    assert_same_logits(tmp_path / "hf", setup.model, decode_model(bundle, setup.model, setup.stage_split, model_hash).params)
    stage1 = read_stage_index(blobs.read(model_hash), setup.stage_split)[1]
    blobs.path_for(stage1).unlink()  # a data dir missing a stage cannot export
    with pytest.raises(ExportError, match=f"does not hold the model {stage1.hex()[:16]}"):
        export_state(setup.model, model_hash, tmp_path / "node", tmp_path / "hf2", setup.stage_split)


def test_a_missing_corrupt_or_foreign_state_and_a_gpt_are_refused(tmp_path):
    blob, state_hash = genesis_blob(LLAMA)
    model = Setup(LLAMA, b"").model
    with pytest.raises(ExportError, match="not a node's data dir"):
        export_state(model, state_hash, tmp_path / "nowhere", tmp_path / "hf")
    node = DataDir(tmp_path / "node")
    with pytest.raises(ExportError, match=f"does not hold the model {state_hash.hex()[:16]}"):
        export_state(model, state_hash, tmp_path / "node", tmp_path / "hf")
    node.blobs.path_for(state_hash).write_bytes(blob[:-1] + bytes([blob[-1] ^ 1]))
    with pytest.raises(ExportError, match="is corrupt"):
        export_state(model, state_hash, tmp_path / "node", tmp_path / "hf")
    other_blob, other_hash = genesis_blob(TrainingSpec(preset="llama-micro", model={"n_layer": 1}))
    node.blobs.put(other_blob)
    with pytest.raises(ExportError, match="not this run's global state"):
        export_state(model, other_hash, tmp_path / "node", tmp_path / "hf")
    with pytest.raises(ExportError, match="only Llama models export"):
        export_state(preset("micro"), state_hash, tmp_path / "node", tmp_path / "hf")
    assert not (tmp_path / "hf").exists()


def test_a_round_before_the_run_starts_does_not_exist():
    from protocol.chain.client import ChainClient
    from protocol.chain.deploy import deploy
    from protocol.chain.devchain import DevChain

    chain = DevChain(funded_accounts=1)
    dep = deploy(chain.handle, chain.deployer, RunConfig(training={"preset": "llama-micro"}), progress=lambda m: None)
    with pytest.raises(ExportError, match=r"round 0 does not exist \(current round: none\)"):
        attested_model(ChainClient(chain.handle, dep), 0)


def test_the_cli_refuses_a_gpt_run_in_one_line_before_reaching_the_chain(tmp_path):
    addr = "0x" + "11" * 20
    dep = Deployment(chain_id=31337, deploy_block=0, deployer=addr,
                     contracts=ContractAddresses(**{name: addr for name in ContractAddresses.model_fields}),
                     run_config=RunConfig(training={"preset": "micro"}), run_config_hash="00", sources_hash="00")
    save_deployment(dep, tmp_path / "deployment.json")
    result = CliRunner().invoke(app, ["export", "--round", "0", "--out", str(tmp_path / "hf"), "--data-dir",
                                      str(tmp_path), "--deployment", str(tmp_path / "deployment.json"),
                                      "--rpc", "http://127.0.0.1:9"])
    assert result.exit_code == 1, result.output
    assert result.stderr.strip() == "error: only Llama models export to the Hugging Face layout; this run's model is a gpt model"


@pytest.mark.slow
def test_a_devnet_started_from_a_checkpoint_exports_its_trained_model(tmp_path):
    """~50 s: one miner and one validator train one round from a `transformers` model; the
    validator's data dir holds the model the round attested, which exports and loads back."""
    from protocol.config.run_state import hf_genesis_tables
    from protocol.core.aggregation.state import genesis_state, global_state_hash
    from protocol.core.model.hf_llama import params_from_hf
    from protocol.devnet.network import DevnetOptions, run_devnet

    hf = transformers.LlamaConfig(vocab_size=256, hidden_size=32, intermediate_size=56, num_hidden_layers=2,
                                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=24,
                                  rms_norm_eps=1e-5, tie_word_embeddings=False)
    torch.manual_seed(0)
    start = transformers.LlamaForCausalLM(hf)
    start.save_pretrained(tmp_path / "ckpt")
    opts = DevnetOptions(miners=1, validators=1, rounds=1, out=tmp_path / "out", data_root=tmp_path / "data",
                         timeout_s=300, chain={"commit_duration": 60, "challenge_window": 20},
                         training={"compute": {"inner_steps": 6, "checkpoint_every": 3},
                                   **hf_genesis_tables(tmp_path / "ckpt", {})})
    admin, _, crashed, _ = run_devnet(opts, lambda line: None)
    assert not crashed, crashed
    setup = Setup(TrainingSpec.model_validate(admin.deployment.run_config.training), b"")
    model = setup.model
    theta0 = params_from_hf(model, start.state_dict())
    assert bytes(admin.call("rounds", "model_hash", 0)) == global_state_hash(genesis_state(model, setup.compute,
                                                                                           params=theta0), model)
    trained = attested_model(admin, 0)
    with pytest.raises(ExportError, match="round 1 has not finalized"):
        attested_model(admin, 1)
    with pytest.raises(ExportError, match="round 2 does not exist"):
        attested_model(admin, 2)
    validator_dir = tmp_path / "data" / "node1"  # nodes are numbered miners first
    export_state(model, trained, validator_dir, tmp_path / "hf")
    params = decode_state((validator_dir / "blobs" / trained.hex()).read_bytes(), model, trained).params
    assert not torch.equal(params["tok_emb.weight"], theta0["tok_emb.weight"])  # the round trained it
    assert_same_logits(tmp_path / "hf", model, params)
