"""A staged run (PROTOCOL.md §16) deploys like any run, and a node started on it must say what
it trains: a miner without `--stage`, a `--stage` out of range, or a validator with one is refused
in one error line before anything is written, started or sent."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from protocol.cli.app import app
from protocol.node.data_dir_lock import LOCK_FILE
from tests.conftest import run_cli


@pytest.fixture(scope="module")
def staged(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("staged")
    (tmp / "run.toml").write_text('[training]\npreset = "micro"\nstages = 2\n')
    out = tmp / "dep.json"
    result = CliRunner().invoke(app, ["deploy", "--rpc", "embedded", "--dev-account", "--out", str(out),
                                      "--config", str(tmp / "run.toml")])
    assert result.exit_code == 0, result.output
    return out


def test_a_staged_run_deploys_with_its_stages_in_the_hashed_config(staged: Path) -> None:
    assert json.loads(staged.read_text())["run_config"]["training"]["stages"] == 2


@pytest.mark.parametrize(("role", "extra", "said"), [
    ("miner", [], "give the stage this miner trains (--stage 0 to 1"),
    ("miner", ["--stage", "2"], "--stage 2: this run has stages 0 to 1"),
    ("validator", ["--stage", "0"], "No such option: --stage"),
])
def test_a_node_that_does_not_say_its_stage_rightly_is_refused_before_any_side_effect(
        staged: Path, tmp_path: Path, role: str, extra: list[str], said: str) -> None:
    data = tmp_path / "data"
    # a node command in its own process, as a user runs it: in this one its stop handling would reap
    # the test worker's children (a shared anvil among them)
    result = run_cli(role, "--rpc", "http://127.0.0.1:9", "--deployment", str(staged), "--keys", str(tmp_path / "keys"),
                     "--data-dir", str(data), "--log-format", "text", *extra)
    assert result.code != 0 and said in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    assert not data.exists() or [p.name for p in data.iterdir()] == [LOCK_FILE]
