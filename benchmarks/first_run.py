"""How long a newcomer waits: `veritrain devnet` from the command to round 1's opening, per round,
and in all, for the README's first run (micro preset, 2 rounds) and the default (tiny, 5 rounds).
Each run is a fresh process, as a user starts it; the times are read from the progress lines the
devnet prints (`  42 s round 1/5 · commit ...`). The README and protocol/devnet/progress.py state
these figures; run it on an otherwise idle machine (2 cores for the README's numbers).

    python -m benchmarks first-run [--quick] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

REPO = Path(__file__).resolve().parents[1]
LINE = re.compile(r"^\s*(\d+) s (.*)$")
RUNS = {"micro": ["--preset", "micro", "--rounds", "2"], "tiny": ["--preset", "tiny", "--rounds", "5"]}


def one_run(args: list[str]) -> dict[str, float]:
    """Seconds to round 1's opening, in all, and per round after the first opened."""
    with tempfile.TemporaryDirectory() as out:
        began = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "protocol.cli.app", "devnet", *args, "--out", out],
                              capture_output=True, text=True, cwd=REPO, env={**os.environ, "COLUMNS": "200"})
        total = time.monotonic() - began
    if proc.returncode != 0:
        raise SystemExit(f"devnet {' '.join(args)} failed:\n{proc.stderr[-3000:]}")
    stamps = [(int(m[1]), m[2]) for m in map(LINE.match, proc.stderr.splitlines()) if m]
    first = next(s for s, text in stamps if text.startswith("round 1/"))
    rounds = int(args[args.index("--rounds") + 1])
    return {"first_round_s": first, "total_s": round(total, 1), "per_round_s": round((total - first) / rounds, 1)}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks first-run", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="the micro run only")
    parser.add_argument("--trials", type=int, default=1)
    parser.add_argument("--json", type=Path, default=Path("out/bench/first_run.json"))
    args = parser.parse_args(argv)
    names = ["micro"] if args.quick else list(RUNS)
    figures: dict[str, dict[str, float]] = {}
    for name in names:
        runs = [one_run(RUNS[name]) for _ in range(args.trials)]
        figures[name] = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    table = Table(title=f"veritrain devnet, median of {args.trials}: seconds")
    for column in ("run", "to round 1", "per round", "in all"):
        table.add_column(column, justify="left" if column == "run" else "right")
    for name, f in figures.items():
        table.add_row(f"{name} ({' '.join(RUNS[name])})", f"{f['first_round_s']:.0f}", f"{f['per_round_s']:.0f}",
                      f"{f['total_s']:.0f}")
    Console().print(table)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"trials": args.trials, "figures": figures}, indent=2) + "\n")
    return 0
