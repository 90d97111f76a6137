"""`benchmarks pipeline` measures the stages in fresh processes and reports the figures issue 32 names."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.slow
def test_quick_pipeline_reports_every_figure(tmp_path: Path) -> None:
    out = tmp_path / "pipeline.json"
    proc = subprocess.run([sys.executable, "-m", "benchmarks", "pipeline", "--quick", "--json", str(out)],
                          capture_output=True, text=True, timeout=900, check=False)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    figures = json.loads(out.read_text())["figures"]
    assert figures["replay_exact"] == {"2": True, "3": True}
    assert figures["detected_at_step"] == 3
    for key in ("peak_mem_ratio", "throughput_ratio", "bytes_ratio"):
        assert set(figures[key]) == {"2", "3"} and all(v > 0 for v in figures[key].values()), key
    assert all(v < 1 for v in figures["peak_mem_ratio"].values())  # a stage holds less than the whole model
