"""Run config: TOML loading, validation errors that say what is wrong, stable hashing."""

from __future__ import annotations

import pytest

from protocol.config.run_config import ChainParams, RunConfig, load_run_config
from protocol.core.errors import ConfigError


def test_defaults_are_consistent():
    cfg = load_run_config(None)
    phases = cfg.chain.commit_duration + cfg.chain.score_duration + cfg.chain.reveal_duration
    assert cfg.chain.unbonding_delay > phases + cfg.chain.challenge_window


def test_hash_is_stable_and_covers_every_field(tmp_path):
    path = tmp_path / "run.toml"
    path.write_text('run_name = "x"\n[chain]\nemission_per_round = 5\n[training]\nH = 30\n')
    cfg = load_run_config(path)
    assert cfg.config_hash() == load_run_config(path).config_hash()
    assert cfg.config_hash() != cfg.model_copy(update={"run_seed": 1}).config_hash()
    assert cfg.config_hash() != cfg.model_copy(update={"training": {"H": 31}}).config_hash()
    assert cfg.genesis_hash() != cfg.model_copy(update={"training": {"H": 31}}).genesis_hash()


def test_unbonding_shorter_than_a_round_is_rejected():
    with pytest.raises(ValueError, match="unbonding_delay"):
        ChainParams(commit_duration=100, score_duration=100, reveal_duration=100, challenge_window=100,
                    unbonding_delay=400)


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
