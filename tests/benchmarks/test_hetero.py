"""`python -m benchmarks hetero --quick`: capacity scaling beats fixed work on mixed hardware.

One shared quick run (real training on the micro preset, simulated clock, < 30 s): the
scaled arm trains more tokens a round, nobody misses a round, and the slow miners, who miss
every fixed-work round, are checked and paid under scaling.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import hetero

FIGURES = {"tokens_per_round_scaled", "tokens_per_round_fixed", "rounds_missed_scaled",
           "rounds_missed_fixed", "heldout_loss_scaled", "heldout_loss_fixed", "rounds_scaled",
           "rounds_fixed", "checks_per_miner_per_round", "seconds_per_step", "config"}


@pytest.fixture(scope="module")
def figures(tmp_path_factory: pytest.TempPathFactory) -> dict:
    out = tmp_path_factory.mktemp("hetero") / "hetero.json"
    assert hetero.main(["--quick", "--json", str(out)]) == 0
    return json.loads(Path(out).read_text())["figures"]


def test_json_has_the_figures(figures: dict) -> None:
    assert FIGURES <= set(figures)
    assert set(figures["checks_per_miner_per_round"]) == {"fixed", "scaled"}
    assert figures["seconds_per_step"] > 0


def test_scaling_trains_more_tokens_per_round(figures: dict) -> None:
    assert figures["tokens_per_round_scaled"] > figures["tokens_per_round_fixed"]


def test_only_fixed_work_misses_rounds(figures: dict) -> None:
    assert figures["rounds_missed_scaled"] == 0
    assert figures["rounds_missed_fixed"] > 0


def test_window_sizing_gives_the_expected_plan(figures: dict) -> None:
    # W = H t / 0.4: slow miners plan 0.5 W / 3t = 12.5 -> 12 steps; the round lasts 36t
    # (0.48 W), so the same budget fits twice the rounds of fixed work (one W each)
    assert figures["rounds_fixed"] == figures["config"]["windows"]
    assert figures["rounds_scaled"] == int(figures["config"]["windows"] / 0.48)
    assert figures["tokens_per_round_fixed"] == 2 * 30 * 8 * 32
    assert figures["tokens_per_round_scaled"] == (2 * 30 + 2 * 12) * 8 * 32


def test_slow_miners_are_checked_only_when_scaled(figures: dict) -> None:
    checks = figures["checks_per_miner_per_round"]
    assert checks["fixed"] == {"fast": 2.0, "slow": 0.0}
    assert checks["scaled"] == {"fast": 2.0, "slow": 2.0}


def test_losses_are_finite(figures: dict) -> None:
    for arm in ("fixed", "scaled"):
        assert 0 < figures[f"heldout_loss_{arm}"] < 10
