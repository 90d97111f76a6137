"""Run config: TOML loading, validation errors that say what is wrong, stable hashing."""

from __future__ import annotations

import pytest

from protocol.config.run_config import ChainParams, RunConfig, load_run_config
from protocol.core.errors import ConfigError


def test_defaults_are_consistent():
    cfg = load_run_config(None)
    c = cfg.chain
    phases = c.commit_duration + c.score_duration + c.reveal_duration + c.audit_duration
    assert c.unbonding_delay > phases + c.challenge_window
    assert (c.audit_duration, c.audit_sample) == (120, 1)


def test_hash_is_stable_and_covers_every_field(tmp_path):
    path = tmp_path / "run.toml"
    path.write_text('run_name = "x"\n[chain]\nemission_per_round = 5\n[training]\nH = 30\n')
    cfg = load_run_config(path)
    assert cfg.config_hash() == load_run_config(path).config_hash()
    assert cfg.config_hash() != cfg.model_copy(update={"run_seed": 1}).config_hash()
    assert cfg.config_hash() != cfg.model_copy(update={"training": {"H": 31}}).config_hash()
    assert cfg.genesis_hash() != cfg.model_copy(update={"training": {"H": 31}}).genesis_hash()


def test_unbonding_shorter_than_a_round_is_rejected():
    phases = {"commit_duration": 100, "score_duration": 100, "reveal_duration": 100, "audit_duration": 100,
              "challenge_window": 100, "result_duration": 101, "result_challenge_window": 99}
    with pytest.raises(ValueError, match="unbonding_delay"):
        ChainParams(**phases, unbonding_delay=700)
    # the result phase and its challenge window count: a signer must not leave before it can be slashed
    with pytest.raises(ValueError, match="unbonding_delay"):
        ChainParams(**phases, unbonding_delay=600)
    assert ChainParams(**phases, unbonding_delay=701).round_span() == 700
    # a late report must resolve before the result deadline, or every such round would fall back
    with pytest.raises(ValueError, match="result_duration"):
        ChainParams(**{**phases, "result_duration": 100}, unbonding_delay=5000)


@pytest.mark.parametrize("text, needle", [
    ("[chain\n", "not valid TOML"),
    ("[chain]\nslash_bps = 20000\n", "chain.slash_bps"),
    ("mystery = 1\n", "mystery"),
])
def test_bad_files_raise_config_errors(tmp_path, text, needle):
    path = tmp_path / "run.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=needle):
        load_run_config(path)


def test_missing_file():
    with pytest.raises(ConfigError, match="not found"):
        load_run_config("/nonexistent/run.toml")


def test_explicit_genesis_hash_wins():
    cfg = RunConfig(genesis_model_hash="0x" + "ab" * 32)
    assert cfg.genesis_hash() == bytes.fromhex("ab" * 32)


def test_the_profile_section_is_the_replay_profile_type(tmp_path):
    """[training.profile] parses into core's ReplayProfile (one type), unknown keys refused."""
    from protocol.config.run_setup import Setup, training_spec
    from protocol.core.hardware.replay_profile import ReplayProfile, profile_hash

    path = tmp_path / "run.toml"
    path.write_text('[training.profile]\nthreads = 2\ncpu_capability = "default"\n')
    spec = training_spec(load_run_config(path))
    assert isinstance(spec.profile, ReplayProfile)
    assert Setup(spec, b"").profile == ReplayProfile(threads=2, cpu_capability="default")
    # the deployed JSON round-trips to the same profile, so every node hashes it alike
    again = spec.model_validate(spec.model_dump(mode="json"))
    assert profile_hash(again.profile) == profile_hash(spec.profile)
    path.write_text('[training.profile]\nthread = 2\n')
    with pytest.raises(ConfigError, match="thread"):
        training_spec(load_run_config(path))
    path.write_text('[training.profile]\nthreads = 0\n')
    with pytest.raises(ConfigError, match="threads"):
        training_spec(load_run_config(path))


@pytest.mark.parametrize("key, value", [("top_g", 8), ("heldout_batches", 4), ("selection", "top-consensus-test"),
                                        ("fan_in", 4)])
def test_each_consensus_parameter_is_in_the_run_config_hash(tmp_path, monkeypatch, key, value):
    """top_g, heldout_batches and the selection rule change θ_{r+1} or a result root, so they are
    in `[training]` and its hash; written out at their defaults they keep a written config's hash."""
    from protocol.config.run_setup import training_spec
    from protocol.core.aggregation.selection import SELECTION_RULES, top_consensus_v1

    monkeypatch.setitem(SELECTION_RULES, "top-consensus-test", top_consensus_v1)  # a second known rule
    path = tmp_path / "run.toml"
    path.write_text('[training]\npreset = "micro"\nselection = "top-consensus-v1"\ntop_g = 16384\nheldout_batches = 8\n')
    base = load_run_config(path)
    assert training_spec(base) == training_spec(RunConfig(training={"preset": "micro"}))  # the defaults
    changed = base.model_copy(update={"training": {**base.training, key: value}})
    assert getattr(training_spec(changed), key) == value
    assert changed.config_hash() != base.config_hash()
    # deploy writes the whole spec, so a deployed run pins them even where run.toml omits them
    deployed = training_spec(RunConfig(training={"preset": "micro"})).model_dump(mode="json")
    assert (deployed["selection"], deployed["top_g"], deployed["heldout_batches"]) == ("top-consensus-v1", 16_384, 8)


@pytest.mark.parametrize("text, needle", [
    ('[training]\nselection = "top-stake-v1"\n', "selection"),
    ("[training]\ntop_g = 0\n", "top_g"),
    ("[training]\ntop_g = 16385\n", "top_g"),
    ("[training]\nheldout_batches = 0\n", "heldout_batches"),
    ("[training]\nfan_in = 1\n", "fan_in"),
    ('[training]\nfan_in = 4\ncompute = { aggregation = "exact-v1" }\n', "fan_in needs aggregation"),
])
def test_bad_consensus_parameters_are_refused(tmp_path, text, needle):
    from protocol.config.run_setup import training_spec

    path = tmp_path / "run.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=needle):
        training_spec(load_run_config(path))


def test_the_example_run_config_writes_the_consensus_parameters_at_their_defaults():
    from pathlib import Path

    from protocol.config.run_setup import training_spec

    example = Path(__file__).resolve().parents[2] / "examples" / "run.toml"
    spec = training_spec(load_run_config(example))
    default = training_spec(RunConfig())
    assert {"top_g", "fan_in"} <= set(load_run_config(example).training)  # written, so in the example's hash
    assert (spec.selection, spec.top_g, spec.heldout_batches, spec.fan_in) == (default.selection, default.top_g,
                                                                               default.heldout_batches, default.fan_in)


def test_a_run_cannot_set_round_steps():
    """`round_steps` marks one miner's shortened round (ComputeConfig.with_steps); a run that set
    it would make every miner's H look like a shortened one and break the absolute score's scale."""
    from protocol.config.run_setup import resolve

    with pytest.raises(ConfigError, match=r"unknown keys: \['round_steps'\]"):
        _ = resolve(RunConfig(training={"compute": {"round_steps": 60}})).compute
    assert resolve(RunConfig(training={"compute": {"inner_steps": 60}})).compute.full_steps == 60


def test_absence_and_report_cap_are_in_the_hashed_chain_params():
    base = RunConfig()
    assert (base.chain.absence_rounds, base.chain.max_reports_per_round) == (3, 16)
    assert RunConfig(chain=ChainParams(absence_rounds=1)).config_hash() != base.config_hash()
    assert RunConfig(chain=ChainParams(max_reports_per_round=4)).config_hash() != base.config_hash()
    with pytest.raises(ValueError, match="absence_rounds"):
        ChainParams(absence_rounds=17)
