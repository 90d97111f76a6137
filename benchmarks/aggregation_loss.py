"""Held-out loss by aggregation rule and cap (issue 31): the same devnet (micro preset, its
miners, validators and rounds) run once per arm, each arm a rule and a `top_g`, and the held-out
loss the validators attested for each round's model, read from each run's report.json. Arms:
exact-v1 with today's top 16, exact-sum-v1 with the top 16 (the rule alone), exact-sum-v1 with
every verified update (the cap alone). Each run is a fresh `veritrain devnet` process; the runs
use the same run config but for the arm, so the genesis model and data are the same, while the
updates differ with the model they trained from.

    python -m benchmarks aggregation-loss [--miners 32] [--validators 3] [--rounds 5] [--json PATH]
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


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks aggregation-loss", description=__doc__.split("\n")[0])
    parser.add_argument("--miners", type=int, default=32)
    parser.add_argument("--validators", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=5, help="models after genesis whose loss is compared")
    parser.add_argument("--json", type=Path, default=Path("out/bench/aggregation_loss.json"))
    args = parser.parse_args(argv)
    losses = {arm: run_arm(rule, top_g, args.miners, args.validators, args.rounds) for arm, (rule, top_g) in ARMS.items()}
    table = Table(title=f"held-out loss (nats) of θ_r, devnet of {args.miners} miners and {args.validators} validators, micro")
    table.add_column("arm")
    for r in range(1, args.rounds + 1):
        table.add_column(f"θ_{r}", justify="right")
    for arm, values in losses.items():
        table.add_row(arm, *("fallback" if v is None else f"{v:.4f}" for v in values))
    Console(width=160).print(table)
    last = {arm: values[-1] for arm, values in losses.items()}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"miners": args.miners, "validators": args.validators, "preset": "micro",
                                     "figures": {"heldout_loss": losses, "final_heldout_loss": last}}, indent=2) + "\n")
    return 0
