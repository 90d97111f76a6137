"""Nodes load ABIs from cached artifacts: the Vyper compiler runs once per source hash, not per start."""

from __future__ import annotations

import json

import pytest

import contracts.build as build
from protocol.chain.backend import connect
from protocol.chain.client import ChainClient
from protocol.chain.deployment import ContractAddresses, Deployment
from protocol.config.run_config import RunConfig


def _fake_deployment(chain_id: int) -> Deployment:
    addrs = {name: "0x" + f"{i + 1:040x}" for i, name in enumerate(ContractAddresses.model_fields)}
    return Deployment(chain_id=chain_id, deploy_block=0, deployer="0x" + "ee" * 20,
                      contracts=ContractAddresses(**addrs), run_config=RunConfig(), run_config_hash="00" * 32,
                      sources_hash=build.sources_hash())


def test_second_load_never_calls_the_compiler(tmp_path, monkeypatch):
    import vyper.compiler

    monkeypatch.setenv("VERITRAIN_CACHE", str(tmp_path))
    monkeypatch.setattr(build, "_LOADED", {})
    real = vyper.compiler.compile_from_file_input
    calls: list[str] = []

    def counting(file_input, *args, **kwargs):
        calls.append(str(file_input.resolved_path))
        return real(file_input, *args, **kwargs)

    monkeypatch.setattr(vyper.compiler, "compile_from_file_input", counting)
    first = build.compile_all()
    assert len(calls) == len(build.CONTRACT_NAMES)  # a cold cache: each contract compiled once
    files = sorted(p.name for p in (tmp_path / "contracts").glob("*.json"))
    assert len(files) == len(build.CONTRACT_NAMES) and not list((tmp_path / "contracts").glob(".tmp-*"))
    for path in (tmp_path / "contracts").glob("*.json"):
        assert set(json.loads(path.read_text())) == {"abi", "bytecode", "bytecode_runtime", "immutables_size"}

    def refuse(*_args, **_kwargs):
        raise AssertionError("the Vyper compiler ran with a warm cache")

    monkeypatch.setattr(vyper.compiler, "compile_from_file_input", refuse)
    monkeypatch.setattr(build, "_LOADED", {})  # a fresh process: only the on-disk cache is warm
    assert build.compile_all() == first
    handle = connect(None)
    client = ChainClient(handle, _fake_deployment(handle.chain_id))
    assert client.rounds.functions.commit_update and client.rewards.functions.claim
    ChainClient(handle, _fake_deployment(handle.chain_id))  # and again, from the in-process memo


def test_corrupt_artifact_is_rebuilt(tmp_path, monkeypatch):
    monkeypatch.setenv("VERITRAIN_CACHE", str(tmp_path))
    monkeypatch.setattr(build, "_LOADED", {})
    key = build.sources_hash()
    path = tmp_path / "contracts" / f"Scores-{key[:16]}.json"
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    art = build.compile_contract("Scores", key)
    assert art.runtime_size > 0 and json.loads(path.read_text())["abi"] == art.abi


@pytest.mark.parametrize("name", ["Settlement", "constants"])
def test_only_deployable_contracts_compile(name):
    with pytest.raises(ValueError):
        build.compile_contract(name)
