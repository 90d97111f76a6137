"""`benchmarks pipeline` measures the stages in fresh processes, and S stages on S libp2p hosts over
the stage link, and reports the figures issue 32 names."""

from __future__ import annotations

import json
import math
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
    assert set(figures["throughput_link_ratio"]) == {"2", "3"}
    assert all(0 < v < math.inf for v in figures["throughput_link_ratio"].values())
    sent = figures["link_bytes_per_step"]  # by stage: an edge stage sends one way, a middle one both
    assert {k: len(v) for k, v in sent.items()} == {"2": 2, "3": 3}
    assert all(0 < b < math.inf for v in sent.values() for b in v)
    assert sent["3"][1] > 1.9 * sent["3"][0]
    # what went over the link is the float32 tensors plus headers and answers of a few hundred bytes each
    assert all(1 <= v < 1.05 for v in figures["link_bytes_over_tensors"].values())
