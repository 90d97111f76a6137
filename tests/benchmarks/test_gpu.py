"""`benchmarks gpu`: without CUDA it says so and exits 0; its measuring code runs on any device
(here on CPU with a micro Llama), and it never imports libp2p."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from benchmarks import gpu


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA: the benchmark would run for real")
def test_without_cuda_it_says_so_and_exits_zero(tmp_path: Path) -> None:
    out = tmp_path / "gpu.json"
    proc = subprocess.run([sys.executable, "-m", "benchmarks", "gpu", "--json", str(out)], capture_output=True,
                          text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert gpu.NO_CUDA in proc.stdout
    assert json.loads(out.read_text()) == {"figures": {}, "cuda": False, "reason": gpu.NO_CUDA}


def test_the_round_measures_on_cpu_and_replays_bitwise(tmp_path: Path) -> None:
    result = gpu.measure("cpu", "llama-micro", steps=6, every=3, batch_size=4, dtype="float32", folder=tmp_path)
    figures = result["figures"]
    assert figures["replay_bitwise"] is True and figures["proof_holds"] is True
    assert figures["tokens_per_s_bare"] > 0 and figures["tokens_per_s_miner"] > 0
    assert figures["miner_ratio"] == pytest.approx(figures["tokens_per_s_bare"] / figures["tokens_per_s_miner"])
    assert 0 < figures["cost_ratio"]


def test_a_whole_measurement_imports_no_libp2p(tmp_path: Path) -> None:
    code = ("import sys, pathlib, benchmarks.gpu as g;"
            f"g.measure('cpu', 'llama-micro', 6, 3, 4, 'float32', pathlib.Path({str(tmp_path)!r}));"
            "bad = [m for m in sys.modules if m.split('.')[0] in ('libp2p', 'fastecdsa', 'trio', 'web3', 'multiaddr')];"
            "print(bad); sys.exit(1 if bad else 0)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
