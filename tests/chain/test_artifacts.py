"""Nodes load the shipped contract artifacts (contracts/artifacts); the compiler runs only in
`python -m contracts.build`, and a fresh compile must give exactly what is shipped."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import contracts.build as build
from protocol.core.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]


def test_shipped_artifacts_are_a_fresh_compile():
    # a contract edited without `python -m contracts.build` fails here
    expected = build.artifact_files(build.compile_all())
    shipped = {p.name: p.read_text() for p in build.ARTIFACTS_DIR.glob("*.json")}
    assert sorted(shipped) == sorted(expected)
    stale = [name for name in expected if shipped[name] != expected[name]]
    assert not stale, f"rebuild with `python -m contracts.build`: {stale} differ from a fresh compile"
    assert not build.stale()


def test_a_node_starts_without_the_compiler():
    # a fresh interpreter: load every artifact and build a client; vyper is never imported
    script = textwrap.dedent("""
        import sys
        from contracts.build import CONTRACT_NAMES, load_all, manifest
        from protocol.chain.backend import connect
        from protocol.chain.client import ChainClient
        from protocol.chain.deployment import ContractAddresses, Deployment
        from protocol.config.run_config import RunConfig

        arts = load_all()
        assert sorted(arts) == sorted(CONTRACT_NAMES) and all(a.deployed_size > 0 for a in arts.values())
        addrs = {name: "0x" + f"{i + 1:040x}" for i, name in enumerate(ContractAddresses.model_fields)}
        handle = connect(None)
        deployment = Deployment(chain_id=handle.chain_id, deploy_block=0, deployer="0x" + "ee" * 20,
                                contracts=ContractAddresses(**addrs), run_config=RunConfig(),
                                run_config_hash="00" * 32, sources_hash=manifest()["sources_hash"])
        client = ChainClient(handle, deployment)
        assert client.rounds.functions.commit_update and client.rewards.functions.claim
        assert "vyper" not in sys.modules, "the compiler was imported"
    """)
    subprocess.run([sys.executable, "-c", script], cwd=ROOT, check=True, timeout=120)


def test_artifacts_built_from_other_sources_are_stale(tmp_path):
    # artifacts built from a copy of the sources with one edit: the sources here are newer
    folder = tmp_path / "contracts"
    shutil.copytree(build.CONTRACTS_DIR, folder, ignore=shutil.ignore_patterns("__pycache__", "artifacts"))
    assert build.contracts_hash(folder) == build.contracts_hash()
    token = folder / "Token.vy"
    token.write_text(token.read_text() + "\n# an edit\n")
    artifacts = tmp_path / "artifacts"
    shutil.copytree(build.ARTIFACTS_DIR, artifacts)
    manifest = json.loads((artifacts / build.MANIFEST).read_text())
    (artifacts / build.MANIFEST).write_text(json.dumps({**manifest, "contracts_hash": build.contracts_hash(folder)}))
    assert build.stale(artifacts) and not build.stale()


def test_missing_or_corrupt_artifact_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="contracts.build"):
        build.load_artifact("Scores", tmp_path)
    (tmp_path / "Scores.json").write_text("{not json")
    with pytest.raises(ConfigError, match="contracts.build"):
        build.load_artifact("Scores", tmp_path)
    (tmp_path / "Rewards.json").write_text(json.dumps({"abi": []}))
    with pytest.raises(ConfigError, match="contracts.build"):
        build.load_artifact("Rewards", tmp_path)


@pytest.mark.parametrize("name", ["Settlement", "constants", "round_clock"])
def test_only_deployable_contracts_load_or_compile(name):
    with pytest.raises(ValueError):
        build.load_artifact(name)
    with pytest.raises(ValueError):
        build.compile_contract(name)
