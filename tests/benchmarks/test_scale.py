"""`benchmarks scale` runs its roles in fresh processes and reports the figures the issue names."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import scale

FIELDS = {"params", "overhead_ratio", "cost_ratio", "bytes_per_check", "peak_mem_ratio_miner",
          "peak_mem_ratio_validator"}


@pytest.mark.slow
def test_quick_scale_reports_every_figure_per_preset(tmp_path: Path) -> None:
    out = tmp_path / "scale.json"
    proc = subprocess.run([sys.executable, "-m", "benchmarks", "scale", "--quick", "--json", str(out)],
                          capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr
    presets = json.loads(out.read_text())["figures"]["presets"]
    assert set(presets) == {"micro", "llama-micro"}
    for name, row in presets.items():
        assert set(row) == FIELDS, name
        assert row["params"] > 0 and row["bytes_per_check"] > 0
        assert row["overhead_ratio"] > 0 and row["cost_ratio"] > 0  # timings: shared cores bound nothing
        assert row["peak_mem_ratio_miner"] > 0 and row["peak_mem_ratio_validator"] > 0


def test_a_preset_over_budget_is_skipped_and_says_why() -> None:
    last = {"params": 1000, "seconds": {"miner_s": [10.0]}}
    assert scale.estimated_s(None, 10**6, 3) == 0.0  # the first preset always runs
    assert scale.estimated_s(last, 2000, 3) == pytest.approx(12 * 10.0 * 2)


def test_targets_apply_from_the_tiny_preset() -> None:
    assert not scale.targeted("micro") and not scale.targeted("llama-micro")
    assert scale.targeted("tiny") and scale.targeted("llama-tiny") and scale.targeted("small")
    assert scale.misses({"overhead_ratio": 1.2, "cost_ratio": 0.2, "peak_mem_ratio_miner": 1.0,
                         "peak_mem_ratio_validator": 1.6}) == ["overhead_ratio", "peak_mem_ratio_validator"]
