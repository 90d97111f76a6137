"""docs/OPERATORS.md §10.3, run: a node refuses a deployment it does not reproduce, before it
sends anything, with the line the table names: contracts built from other sources, a pinned
model hash this version computes otherwise, and an edited run config."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from protocol.chain.backend import connect, dev_account
from protocol.chain.deploy import deploy, fund
from protocol.chain.deployment import save_deployment
from protocol.config.run_config import RunConfig
from protocol.node.keys import new_keys
from protocol.node.pinning import prepare
from tests.conftest import run_cli
from tests.integration.netutil import PASSWORD

pytestmark = pytest.mark.anvil


@pytest.fixture(scope="module")
def deployed(anvil, tmp_path_factory) -> tuple[str, Path, Path, Path]:
    """(rpc, a faithful deployment file, one whose pinned model hash another version computed, keys)."""
    tmp = tmp_path_factory.mktemp("upgrade")
    handle = connect(anvil.url)
    deployer = dev_account(handle)
    pinned = prepare(RunConfig(training={"preset": "micro"}))
    other = pinned.model_copy(update={"training": {**pinned.training, "model_config_hash": "ab" * 32}})
    keys = tmp / "keys"
    address, _ = new_keys(keys, PASSWORD, kdf_iterations=2)
    paths = []
    for name, config in (("deployment.json", pinned), ("other-version.json", other)):
        dep = deploy(handle, deployer, config)
        fund(handle, dep, deployer, [address], 10**18, 0)
        save_deployment(dep, tmp / name)
        paths.append(tmp / name)
    return anvil.url, paths[0], paths[1], keys


def _refused(rpc: str, dep: Path, keys: Path, data: Path) -> str:
    result = run_cli("miner", "--rpc", rpc, "--deployment", str(dep), "--keys", str(keys), "--data-dir", str(data),
                     "--log-format", "text", env={"VERITRAIN_PASSWORD": PASSWORD})
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert result.code == 1 and len(errors) == 1 and "Traceback" not in result.stderr, result.stderr
    assert "registering" not in result.stderr, result.stderr  # nothing sent
    return errors[0]


def _edited(dep: Path, tmp: Path, change: dict) -> Path:
    data = json.loads(dep.read_text())
    for key, value in change.items():
        if isinstance(value, dict):
            data[key] = {**data[key], **value}
        else:
            data[key] = value
    path = tmp / "edited.json"
    path.write_text(json.dumps(data))
    return path


def test_contracts_of_other_sources_are_refused(deployed, tmp_path: Path) -> None:
    rpc, dep, _, keys = deployed
    line = _refused(rpc, _edited(dep, tmp_path, {"sources_hash": "cd" * 32}), keys, tmp_path / "data")
    assert "the deployment's contracts were built from other sources" in line


def test_an_edited_run_config_is_refused(deployed, tmp_path: Path) -> None:
    rpc, dep, _, keys = deployed
    line = _refused(rpc, _edited(dep, tmp_path, {"run_config": {"run_name": "edited"}}), keys, tmp_path / "data")
    assert "run config does not hash to its run_config_hash" in line


def test_a_model_this_version_computes_otherwise_is_refused(deployed, tmp_path: Path) -> None:
    rpc, _, other, keys = deployed
    line = _refused(rpc, other, keys, tmp_path / "data")
    assert "local model config hash" in line and "differs from the deployed" in line
