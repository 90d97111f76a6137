"""A staged run is specified (PROTOCOL.md §16) but the nodes do not train in stages yet: `deploy`
refuses it in one error line before anything is deployed, rather than training it whole."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from protocol.cli.app import app


def test_deploy_refuses_a_staged_run_before_deploying(tmp_path: Path) -> None:
    (tmp_path / "run.toml").write_text('[training]\npreset = "micro"\nstages = 2\n')
    out = tmp_path / "dep.json"
    result = CliRunner().invoke(app, ["deploy", "--rpc", "embedded", "--dev-account", "--out", str(out),
                                      "--config", str(tmp_path / "run.toml")])
    assert result.exit_code == 1, result.output
    assert "stages = 2: a staged run is specified" in result.stderr and "Traceback" not in result.output
    assert not out.exists()
