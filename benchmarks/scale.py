"""Costs by model size on CPU: miner overhead, validator cost, bytes per check, peak memory.

    python -m benchmarks scale [--quick] [--presets A,B,...] [--budget-s S] [--json PATH]

For each preset, smallest first, four fresh processes (`benchmarks.scale_roles`): one times a
bare torch loop against the miner's round (paired trials) and a validator's check and score
of that round; three measure the peak memory the bare loop, the miner round and the
validator's check add to their process. A preset whose estimated time would overrun the
budget (default 20 min, the issue's figure for 2 cores) is skipped and says so.

- overhead_ratio: miner round ÷ bare loop of the same steps (median of paired trials);
- cost_ratio: (check + usefulness score + a 1/4 share of the shared held-out loss) ÷ the miner
  round (medians), as `benchmarks verify` counts it;
- bytes_per_check: the envelope and the checkpoints one check fetches;
- peak_mem_ratio_miner / _validator: memory the work adds ÷ what the bare loop adds.
Targets at tiny and above: overhead <= 1.10, cost <= 0.30, peak memory <= 1.5x.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

DEFAULT_PRESETS = ("micro", "llama-micro", "tiny", "llama-tiny", "small", "llama-small")
TARGETS = {"overhead_ratio": 1.10, "cost_ratio": 0.30, "peak_mem_ratio_miner": 1.5, "peak_mem_ratio_validator": 1.5}
UNTARGETED = ("micro", "llama-micro")  # targets hold at the tiny presets and above
ROLE_TIMEOUT_S = 1800


class RoleFailed(RuntimeError):
    """A measuring process exited non-zero or printed no result."""


def run_role(preset: str, role: str, trials: int, folder: Path) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "benchmarks.scale_roles", preset, role, str(trials), str(folder)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=ROLE_TIMEOUT_S, check=False)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        raise RoleFailed(f"{preset} {role}: exit {proc.returncode}\n{proc.stderr[-2000:]}")
    return dict(json.loads(lines[-1]))


def measure_preset(preset: str, trials: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix=f"scale-{preset}-") as tmp:
        folder = Path(tmp)
        timed = run_role(preset, "time", trials, folder)
        peaks = {role: run_role(preset, role, 1, folder)["peak_bytes"]
                 for role in ("mem-bare", "mem-miner", "mem-validator")}
    bare = max(1, peaks["mem-bare"])
    return {
        "params": timed["params"],
        "overhead_ratio": timed["overhead_ratio"],
        "cost_ratio": timed["cost_ratio"],
        "bytes_per_check": timed["bytes_per_check"],
        "peak_mem_ratio_miner": peaks["mem-miner"] / bare,
        "peak_mem_ratio_validator": peaks["mem-validator"] / bare,
        "peak_bytes": peaks,
        "seconds": {k: timed[k] for k in ("bare_s", "miner_s", "check_s", "score_s")},
    }


def estimated_s(last: dict[str, Any] | None, params: int, trials: int) -> float:
    """Seconds a preset will take, scaled from the last one measured by parameter count."""
    if last is None:
        return 0.0
    per_round = sum(last["seconds"]["miner_s"]) / len(last["seconds"]["miner_s"])
    rounds = 2 * trials + 2 + 4  # paired trials and warm-ups, the checks, three memory runs
    return rounds * per_round * params / last["params"]


def targeted(name: str) -> bool:
    return name not in UNTARGETED


def misses(row: dict[str, Any]) -> list[str]:
    return [k for k, limit in TARGETS.items() if row[k] > limit]


def measure(presets: list[str], trials: int, budget_s: float) -> dict[str, Any]:
    from protocol.core.model.gpt import num_params, preset

    started, rows, skipped, last = time.perf_counter(), {}, {}, None
    for name in sorted(presets, key=lambda p: num_params(preset(p))):
        params = num_params(preset(name))
        left = budget_s - (time.perf_counter() - started)
        guess = estimated_s(last, params, trials)
        if guess > left:
            skipped[name] = f"estimated {guess:.0f} s > {left:.0f} s of budget left"
            continue
        print(f"· {name} ({params:,} params)", file=sys.stderr, flush=True)
        row = measure_preset(name, trials)
        row["targeted"] = targeted(name)
        row["misses"] = misses(row) if row["targeted"] else []
        rows[name] = last = row
    return {"figures": {"presets": {k: {f: v[f] for f in ("params", "overhead_ratio", "cost_ratio", "bytes_per_check",
                                                         "peak_mem_ratio_miner", "peak_mem_ratio_validator")}
                                    for k, v in rows.items()}},
            "rows": rows, "skipped": skipped, "targets": TARGETS, "untargeted": UNTARGETED,
            "trials": trials, "budget_s": budget_s, "wall_s": time.perf_counter() - started}


def render(result: dict[str, Any]) -> None:
    table = Table(title="costs by model size (CPU, 1 thread)")
    for col in ("preset", "params", "overhead", "cost", "bytes/check", "mem miner", "mem validator", "targets"):
        table.add_column(col, justify="right")
    for name, r in result["rows"].items():
        verdict = ("missed: " + ", ".join(r["misses"]) if r["misses"] else "met") if r["targeted"] else "-"
        table.add_row(name, f"{r['params']:,}", f"{r['overhead_ratio']:.3f}", f"{r['cost_ratio']:.3f}",
                      f"{r['bytes_per_check'] / 2**20:.1f} MiB", f"{r['peak_mem_ratio_miner']:.2f}x",
                      f"{r['peak_mem_ratio_validator']:.2f}x", verdict)
    Console(width=150).print(table)
    for name, why in result["skipped"].items():
        print(f"skipped {name}: {why}")
    print(f"targets (tiny and above): {result['targets']}")


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks scale")
    ap.add_argument("--quick", action="store_true", help="micro and llama-micro, one trial")
    ap.add_argument("--presets", default=",".join(DEFAULT_PRESETS), help="comma-separated preset names")
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--budget-s", type=float, default=1200.0, help="skip presets that would overrun this")
    ap.add_argument("--json", type=Path, default=None, help="write the results here")
    args = ap.parse_args(argv)
    presets = ["micro", "llama-micro"] if args.quick else [p for p in args.presets.split(",") if p]
    result = measure(presets, 1 if args.quick else args.trials, args.budget_s)
    render(result)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0
