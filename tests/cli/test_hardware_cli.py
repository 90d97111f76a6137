"""`veritrain hardware` and `--hardware-class`, run as a user would (subprocess, no chain)."""

from __future__ import annotations

import json
import os

import torch

from protocol.chain.deployment import ContractAddresses, Deployment, save_deployment
from protocol.config.run_config import RunConfig
from tests.conftest import run_cli

ADDR = "0x" + "11" * 20


def _deployment(tmp_path, training):
    contracts = ContractAddresses(**{name: ADDR for name in ContractAddresses.model_fields})
    dep = Deployment(chain_id=31337, deploy_block=0, deployer=ADDR, contracts=contracts,
                     run_config=RunConfig(training=training), run_config_hash="00", sources_hash="00")
    path = tmp_path / "deployment.json"
    save_deployment(dep, path)
    return path


def _one_error(result, *needles):
    assert result.code == 1, (result.code, result.stdout, result.stderr)
    lines = [line for line in result.stderr.strip().splitlines() if line.strip()]
    assert lines[-1].startswith("error:") and sum(line.startswith("error:") for line in lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    for needle in needles:
        assert needle in lines[-1], lines[-1]


def test_default_classes_without_measuring():
    result = run_cli("hardware", "--no-measure", "--json", timeout=60)
    assert result.code == 0, result.stderr
    data = json.loads(result.stdout)
    rows = {r["label"]: r for r in data["classes"]}
    assert data["deployment"] is None and data["preset"] == "micro"
    assert rows["cpu/avx2/1t/float32"]["default"] and rows["cpu/avx2/1t/float32"]["runnable"]
    assert all(r["tokens_per_s"] is None and len(r["id"]) == 64 for r in rows.values())
    if torch.backends.cpu.get_cpu_capability() == "AVX2":
        assert rows["cpu/avx512/1t/float32"]["reason"] == "needs avx512, this CPU runs at most avx2"


def test_measures_a_deployments_class(tmp_path):
    path = _deployment(tmp_path, {"preset": "micro", "classes": [{}]})
    result = run_cli("hardware", "--deployment", str(path), "--json", timeout=120)
    assert result.code == 0, result.stderr
    [row] = json.loads(result.stdout)["classes"]
    assert row["permitted"] and row["default"] and row["tokens_per_s"] > 0
    assert "measuring cpu/avx2/1t/float32" in result.stderr


def test_corrupt_deployment_is_one_error_line(tmp_path):
    bad = tmp_path / "deployment.json"
    bad.write_text("{")
    _one_error(run_cli("hardware", "--deployment", str(bad), timeout=60), "corrupt")


def test_miner_refuses_an_unpermitted_class_before_anything_starts(tmp_path):
    path = _deployment(tmp_path, {"preset": "micro"})
    base = ("miner", "--rpc", "http://127.0.0.1:9", "--deployment", str(path), "--keys", str(tmp_path / "keys"),
            "--data-dir", str(tmp_path / "data"), "--log-format", "text")  # the `error:` line a person reads
    _one_error(run_cli(*base, "--hardware-class", "cpu/avx2/7t/float32", timeout=60),
               "not permitted", "cpu/avx2/1t/float32, cpu/avx2/2t/float32, cpu/avx512/1t/float32")
    if (os.cpu_count() or 1) >= 2:  # a permitted class this machine runs, not the run's default: accepted,
        # so the node goes on to its keys (validators replay only miners of their class)
        _one_error(run_cli(*base, "--hardware-class", "cpu/avx2/2t/float32", timeout=60), "VERITRAIN_PASSWORD")
    assert not (tmp_path / "data").exists()


def test_stages_of_a_deployments_model_and_whether_each_fits(tmp_path):
    path = _deployment(tmp_path, {"preset": "llama-small"})
    result = run_cli("hardware", "--deployment", str(path), "--no-measure", "--stages", "3", "--json", timeout=60)
    assert result.code == 0, result.stderr
    data = json.loads(result.stdout)
    stages = data["stages"]
    assert [s["blocks"] for s in stages] == [[0, 1], [2, 3], [4, 5]]  # 6 blocks, balanced
    assert all(s["params"] > 0 and s["bytes"] > s["activation_bytes"] > 0 for s in stages)
    assert data["available_memory"] > 0 and all(s["fits"] == (s["bytes"] <= data["available_memory"]) for s in stages)
    shown = run_cli("hardware", "--deployment", str(path), "--no-measure", "--stages", "2", timeout=60)
    assert shown.code == 0 and "llama-small model in 2 stages" in shown.stdout, shown.stderr


def test_more_stages_than_blocks_is_one_error_before_measuring(tmp_path):
    _one_error(run_cli("hardware", "--stages", "3", timeout=60), "2 to 2 stages")


def test_a_staged_runs_own_stages_with_their_classes_and_whether_this_machine_holds_each(tmp_path):
    """A run with `[training] stages` shows its stages without --stages: each stage's permitted
    classes (stage 1 here permits only a class no machine runs), and which this machine holds."""
    from dataclasses import asdict, replace

    from protocol.config.run_setup import TrainingSpec

    profile = TrainingSpec(preset="micro").profile
    foreign = replace(profile, device="cuda", gpu_model="NVIDIA H200", compute_capability="9.0")
    classes = [asdict(profile), asdict(foreign)]
    path = _deployment(tmp_path, {"preset": "micro", "stages": 2, "classes": classes,
                                  "stage_classes": [classes[:1], classes[1:]]})
    data = json.loads(run_cli("hardware", "--deployment", str(path), "--no-measure", "--json", timeout=60).stdout)
    first, second = data["stages"]
    assert first["class_here"] and not second["class_here"] and not second["holds"]
    assert first["holds"] == first["fits"] is True  # micro fits any test machine
    assert len(first["classes"]) == len(second["classes"]) == 1 and first["classes"] != second["classes"]
    shown = run_cli("hardware", "--deployment", str(path), "--no-measure", timeout=60)
    assert shown.code == 0 and "this machine can hold stage 0" in shown.stdout, shown.stderr
    _one_error(run_cli("hardware", "--deployment", str(path), "--no-measure", "--stages", "3", timeout=60),
               "split into 2 stages")
