"""Held-out loss by aggregation rule and cap (issue 31): the same devnet (micro preset, its
miners, validators and rounds) run once per arm, each arm a rule and a `top_g`, and the held-out
loss the validators attested for each round's model, read from each run's report.json. Arms:
exact-v1 with today's top 16, exact-sum-v1 with the top 16 (the rule alone), exact-sum-v1 with
every verified update (the cap alone). Each run is a fresh `veritrain devnet` process; the runs
use the same run config but for the arm, so the genesis model and data are the same, while the
updates differ with the model they trained from. At 32 miners an arm takes about 25 minutes and
10 GB on 2 cores (arms run one after another: two at once ran out of 24 GB).

With `--sim` the arms run in one process instead (`benchmarks/diloco_sim.py`: the miners' real
training, update derivation and `aggregate`, no chain nor p2p; 12 miners, every update counted):
exact-v1, and exact-sum-v1 with its public clip at 1× and at 2× (the default) the previous
round's norm per step.

    python -m benchmarks aggregation-loss [--sim] [--miners 32] [--validators 3] [--rounds 5] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from rich.console import Console
from rich.table import Table

REPO = Path(__file__).resolve().parents[1]
ARMS = {"exact-v1, top 16": ("exact-v1", 16), "exact-sum-v1, top 16": ("exact-sum-v1", 16),
        "exact-sum-v1, every update": ("exact-sum-v1", 16_384)}


def run_arm(rule: str, top_g: int, miners: int, validators: int, rounds: int) -> list[float | None]:
    """The held-out loss of θ_1 .. θ_rounds (None where a round fell back) of one devnet run."""
    with tempfile.TemporaryDirectory() as out:
        args = ["devnet", "--miners", str(miners), "--validators", str(validators), "--rounds", str(rounds + 1),
                "--preset", "micro", "--commit-window", "120", "--aggregation", rule, "--top-g", str(top_g),
                "--out", out, "--timeout", "3600"]
        proc = subprocess.run([sys.executable, "-m", "protocol.cli.app", *args], capture_output=True, text=True,
                              cwd=REPO, env={**os.environ, "COLUMNS": "200"})
        if proc.returncode != 0:
            raise SystemExit(f"devnet {' '.join(args)} failed:\n{proc.stderr[-3000:]}")
        report = json.loads((Path(out) / "report.json").read_text())
    # round r's held-out loss is θ_r's, the model round r - 1 made: rounds + 1 rounds show θ_1 .. θ_rounds
    return [r["heldout_loss"] for r in report["rounds"][1:]]


SIM_ARMS: dict[str, dict[str, object]] = {"exact-v1": {"aggregation": "exact-v1"},
            "exact-sum-v1, clip 1x": {"aggregation": "exact-sum-v1", "sum_clip_multiplier": 1.0},
            "exact-sum-v1, clip 2x (default)": {"aggregation": "exact-sum-v1", "sum_clip_multiplier": 2.0}}


def sim_arm(overrides: dict[str, object], miners: int, rounds: int) -> list[float | None]:
    """The held-out loss of θ_1 .. θ_rounds, every miner's update aggregated, in one process."""
    from benchmarks.ddp_baseline import Spec
    from benchmarks.diloco_sim import Arm, VtRun, advance
    from protocol.core.train.compute_config import ComputeConfig

    base = ComputeConfig(**overrides)  # type: ignore[arg-type]
    run = advance(Spec(preset="micro", workers=miners, base=base), VtRun(Arm.of(base)), base.inner_steps * rounds)
    return list(run.curve.loss[1:])


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks aggregation-loss", description=__doc__.split("\n")[0])
    parser.add_argument("--sim", action="store_true", help="in one process, 12 miners: the rule and its clip")
    parser.add_argument("--miners", type=int, default=None, help="32 (devnet) or 12 (--sim)")
    parser.add_argument("--validators", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=5, help="models after genesis whose loss is compared")
    parser.add_argument("--json", type=Path, default=Path("out/bench/aggregation_loss.json"))
    args = parser.parse_args(argv)
    if args.sim:
        args.miners = args.miners or 12
        losses = {arm: sim_arm(o, args.miners, args.rounds) for arm, o in SIM_ARMS.items()}
        title = f"held-out loss (nats) of θ_r, {args.miners} miners in one process, micro, every update"
    else:
        args.miners = args.miners or 32
        losses = {arm: run_arm(rule, top_g, args.miners, args.validators, args.rounds) for arm, (rule, top_g) in ARMS.items()}
        title = f"held-out loss (nats) of θ_r, devnet of {args.miners} miners and {args.validators} validators, micro"
    table = Table(title=title)
    table.add_column("arm")
    for r in range(1, args.rounds + 1):
        table.add_column(f"θ_{r}", justify="right")
    for arm, values in losses.items():
        table.add_row(arm, *("fallback" if v is None else f"{v:.4f}" for v in values))
    Console(width=160).print(table)
    last = {arm: values[-1] for arm, values in losses.items()}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"miners": args.miners, "validators": None if args.sim else args.validators,
                                     "mode": "sim" if args.sim else "devnet", "preset": "micro",
                                     "figures": {"heldout_loss": losses, "final_heldout_loss": last}}, indent=2) + "\n")
    return 0
