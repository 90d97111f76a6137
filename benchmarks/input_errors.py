"""How soon `veritrain miner` reports bad input: seconds from the command to its one `error:`
line, for a flag error, a deployment-file error, a wrong keystore password (one key derivation at
the keystore's default work factor, timed alone beside it) and an RPC node that never answers
(the stated 10 s timeout). Each case is a fresh process, as a user runs it; no chain is needed.

    python -m benchmarks input-errors [--trials 5] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

REPO = Path(__file__).resolve().parents[1]
PASSWORD = "benchmark"


def _deployment(folder: Path) -> Path:
    from protocol.chain.deployment import Deployment, save_deployment
    from protocol.config.run_config import RunConfig

    zero = "0x" + "00" * 20
    contracts = {k: zero for k in ("token", "staking", "keys", "rounds", "scores", "rewards", "results",
                                   "column_challenges", "tree_challenges", "account_challenges", "claims_challenges", "disputes")}
    config = RunConfig()
    dep = Deployment(chain_id=31337, deploy_block=0, deployer=zero, contracts=contracts, run_config=config,
                     run_config_hash=config.config_hash().hex(), sources_hash="00")
    save_deployment(dep, folder / "deployment.json")
    return folder / "deployment.json"


def _timed(args: list[str], password: str) -> tuple[float, str]:
    env = {**os.environ, "VERITRAIN_PASSWORD": password, "VERITRAIN_LOG_FORMAT": "text"}
    began = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "protocol.cli.app", "miner", *args], capture_output=True, text=True,
                          env=env, cwd=REPO, stdin=subprocess.DEVNULL, timeout=120)
    took = time.monotonic() - began
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    if proc.returncode == 0 or len(errors) != 1:
        raise SystemExit(f"miner {' '.join(args)} did not fail with one error line:\n{proc.stderr[-2000:]}")
    return took, errors[0]


def _kdf_seconds(keys: Path) -> float:
    from protocol.node.keys import load_keys

    began = time.monotonic()
    load_keys(keys, PASSWORD)
    return time.monotonic() - began


def measure(trials: int) -> dict[str, dict[str, float | str]]:
    from protocol.node.keys import new_keys

    with tempfile.TemporaryDirectory() as tmp, socket.socket() as silent:
        folder = Path(tmp)
        dep, keys = _deployment(folder), folder / "keys"
        new_keys(keys, PASSWORD)  # the default work factor, as `veritrain keys new` makes it
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)  # accepts and never answers
        def node(deployment: Path, rpc: str = "http://127.0.0.1:9", *extra: str) -> list[str]:
            return ["--rpc", rpc, "--deployment", str(deployment), "--keys", str(keys), "--data-dir",
                    str(folder / "data"), *extra]

        cases = {
            "flag (--stake -5)": (node(dep, "http://127.0.0.1:9", "--stake", "-5"), PASSWORD),
            "deployment file missing": (node(folder / "absent.json"), PASSWORD),
            "wrong password": (node(dep), "not the password"),
            "silent RPC node": (node(dep, f"http://127.0.0.1:{silent.getsockname()[1]}"), PASSWORD),
        }
        figures: dict[str, dict[str, float | str]] = {}
        for name, (args, password) in cases.items():
            runs = [_timed(args, password) for _ in range(trials)]
            figures[name] = {"median_s": round(statistics.median(t for t, _ in runs), 2), "error": runs[0][1]}
        figures["one key derivation"] = {"median_s": round(statistics.median(_kdf_seconds(keys)
                                                                                for _ in range(trials)), 2),
                                         "error": ""}
    return figures


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks input-errors", description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="one trial per case")
    parser.add_argument("--json", type=Path, default=Path("out/bench/input_errors.json"))
    args = parser.parse_args(argv)
    trials = 1 if args.quick else args.trials
    figures = measure(trials)
    table = Table(title=f"veritrain miner: seconds to the error line, median of {trials}")
    for column in ("case", "seconds", "the line"):
        table.add_column(column, justify="right" if column == "seconds" else "left")
    for name, f in figures.items():
        table.add_row(name, f"{f['median_s']:.2f}", str(f["error"])[:90])
    Console(width=160).print(table)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"trials": trials, "figures": figures}, indent=2) + "\n")
    return 0
