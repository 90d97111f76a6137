"""Bad input: one clear line on stderr, no traceback, non-zero exit, nothing half-written."""

from __future__ import annotations

import json

import pytest
from eth_account import Account

from protocol.chain.backend import connect, dev_account
from protocol.chain.deploy import deploy
from protocol.chain.deployment import save_deployment
from protocol.config.run_config import RunConfig
from tests.conftest import free_port, run_cli


def assert_one_line_error(result, *needles: str, code: int = 1) -> None:
    assert result.code == code, (result.code, result.stdout, result.stderr)
    lines = [line for line in result.stderr.strip().splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error:")]
    assert len(errors) == 1 and lines[-1] == errors[0], result.stderr
    assert "Traceback" not in result.stderr
    for needle in needles:
        assert needle in errors[0], errors[0]


@pytest.fixture(scope="module")
def anvil_deployment(anvil, tmp_path_factory):
    handle = connect(anvil.url)
    dep = deploy(handle, dev_account(handle), RunConfig())
    path = tmp_path_factory.mktemp("dep") / "deployment.json"
    save_deployment(dep, path)
    return path


def test_unreachable_rpc(anvil_deployment):
    dead = f"http://127.0.0.1:{free_port()}"
    result = run_cli("inspect", "--rpc", dead, "--deployment", str(anvil_deployment))
    assert_one_line_error(result, "cannot reach RPC node")


def test_missing_deployment_file(anvil, tmp_path):
    result = run_cli("inspect", "--rpc", anvil.url, "--deployment", str(tmp_path / "nope.json"))
    assert_one_line_error(result, "not found")


def test_corrupt_deployment_file(anvil, tmp_path):
    bad = tmp_path / "deployment.json"
    bad.write_text('{"chain_id": 31337, "contracts": ')
    result = run_cli("inspect", "--rpc", anvil.url, "--deployment", str(bad))
    assert_one_line_error(result, "corrupt")


def test_chain_id_mismatch(anvil, anvil_deployment, tmp_path):
    data = json.loads(anvil_deployment.read_text())
    data["chain_id"] += 1
    other = tmp_path / "other-chain.json"
    other.write_text(json.dumps(data))
    result = run_cli("inspect", "--rpc", anvil.url, "--deployment", str(other))
    assert_one_line_error(result, "chain id mismatch")


def test_run_config_mismatch(anvil, anvil_deployment, tmp_path):
    data = json.loads(anvil_deployment.read_text())
    data["run_config_hash"] = "00" * 32
    other = tmp_path / "other-config.json"
    other.write_text(json.dumps(data))
    result = run_cli("inspect", "--rpc", anvil.url, "--deployment", str(other))
    assert_one_line_error(result, "run config does not hash to its run_config_hash")


def test_unfunded_deployer_writes_nothing(anvil, tmp_path):
    keystore = tmp_path / "key.json"
    keystore.write_text(json.dumps(Account.encrypt(Account.create().key, "pw", iterations=2)))
    out = tmp_path / "deployment.json"
    result = run_cli("deploy", "--rpc", anvil.url, "--key", str(keystore), "--out", str(out),
                     env={"VERITRAIN_PASSWORD": "pw"})
    assert_one_line_error(result, "no gas money")
    assert not out.exists()


def test_wrong_keystore_password(anvil, tmp_path):
    keystore = tmp_path / "key.json"
    keystore.write_text(json.dumps(Account.encrypt(Account.create().key, "right", iterations=2)))
    result = run_cli("deploy", "--rpc", anvil.url, "--key", str(keystore), "--out", str(tmp_path / "d.json"),
                     env={"VERITRAIN_PASSWORD": "wrong"})
    assert_one_line_error(result, "wrong password")


def test_bad_run_config(anvil, tmp_path):
    cfg = tmp_path / "run.toml"
    cfg.write_text("[chain]\ncommit_duration = 600\nunbonding_delay = 10\n")
    result = run_cli("deploy", "--rpc", anvil.url, "--dev-account", "--config", str(cfg), "--out", str(tmp_path / "d.json"))
    assert_one_line_error(result, "unbonding_delay")


def test_unknown_inspect_view(anvil, anvil_deployment):
    result = run_cli("inspect", "everything", "--rpc", anvil.url, "--deployment", str(anvil_deployment))
    assert_one_line_error(result, "unknown view", code=2)  # a usage error


def test_inspect_summary_table(anvil, anvil_deployment):
    result = run_cli("inspect", "summary", "--rpc", anvil.url, "--deployment", str(anvil_deployment))
    assert result.code == 0, result.stderr
    assert "total supply" in result.stdout and "10,000,000 " in result.stdout  # exact amounts, no rounding
