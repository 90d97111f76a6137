"""`python -m benchmarks aggregation-loss --sim`: each arm trains the real miners and aggregates
by its rule; the JSON carries every arm's losses."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.aggregation_loss import SIM_ARMS, main


def test_every_arm_reports_a_loss_per_round_and_each_rule_learns(tmp_path: Path) -> None:
    out = tmp_path / "loss.json"
    assert main(["--sim", "--miners", "3", "--rounds", "2", "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    losses = data["figures"]["heldout_loss"]
    assert set(losses) == set(SIM_ARMS) and data["mode"] == "sim" and data["miners"] == 3
    for arm, values in losses.items():
        assert len(values) == 2 and values[1] < values[0] < 5.6, (arm, values)  # ln 256 = 5.55 at genesis
    assert data["figures"]["final_heldout_loss"] == {arm: v[-1] for arm, v in losses.items()}
