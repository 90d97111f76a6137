"""Gas of every settlement action and of a whole round, on the embedded chain.

    python -m benchmarks gas [--quick] [--sizes 4x2,16x4,...] [--json PATH]

One scripted round per size (miners x validators), from 4x2 up to 1024x64 (--quick: 4x2
and 16x4): miner commits, the seed, score commits and calldata reveals, the audit close, one
fraud report with votes and resolution, the result posted with an aggregate BLS signature (at
64 validators 56 sign: the target's worst case), its window waited out, finalize (which opens
the next round), one demand of a column leaf answered by a signer, one column challenge of the
right root (the bond is burned) and claims.
`round_settlement_gas` adds up every settlement transaction of the round except the miners'
own commits, the claims and the dispute (filed only when someone cheats).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from protocol.chain.backend import connect, dev_account
from protocol.chain.client import ChainClient
from protocol.chain.deploy import deploy
from protocol.chain.scripted import claim_all, join_network, play_round
from protocol.config.run_config import ChainParams, RunConfig

SIZES = [(4, 2), (16, 4), (64, 8), (256, 16), (256, 64), (1024, 64)]
QUICK = [(4, 2), (16, 4)]
SETTLEMENT = ("store_seed", "commit_scores", "reveal_scores", "audits_done", "post_result", "finalize_result")
TARGETS = {"result_post_gas_max": 300_000, "reveal_gas_base": 100_000, "reveal_gas_per_miner": 300,
           "round_settlement_gas_per_miner_at_1024x64": 20_000, "claim_gas_max": 80_000,
           "commit_update_gas_max": 60_000, "column_challenge_gas_max_at_1024x64": 5_000_000,
           "max_function_gas": 15_000_000}


def signers_for(n_validators: int) -> int:
    """56 of 64 sign at the largest sizes (the target's case); everyone below."""
    return n_validators - n_validators // 8 if n_validators >= 64 else n_validators


def measure(n_miners: int, n_validators: int) -> dict[str, list[int]]:
    handle = connect(None)
    deployer = dev_account(handle)
    # a long challenge window: eth-tester stamps blocks as they come, and the largest sizes spend
    # minutes of wall time between the post and the challenge (gas does not depend on it)
    # long phases too: each transaction is a block a second later, and 4,096 commits outlast an hour
    hour = max(3600, 2 * (n_miners + n_validators))
    config = RunConfig(chain=ChainParams(max_validator_permits=n_validators, commit_duration=hour, score_duration=hour,
                                         reveal_duration=hour, audit_duration=hour, result_duration=2 * hour,
                                         result_challenge_window=2 * hour, unbonding_delay=20 * hour),
                       genesis_supply=10**9)  # stakes for 4,352 accounts
    client = ChainClient(handle, deploy(handle, deployer, config), deployer)
    joined = iter(range(1, n_miners + n_validators + 1))

    def progress(message: str) -> None:  # the round's steps, and every 256th account to join
        if message.startswith("round") or next(joined) % 256 == 0:
            Console().print(f"[dim]  {message}[/dim]")

    net = join_network(client, n_miners, n_validators, progress)
    net.gas.clear()  # joining (registration, stake, BLS keys) is once per account, not per round
    net.record("start", client.start())
    play_round(client, net, progress, cheat=True, signers=signers_for(n_validators),
               challenge_column=n_miners // 2)
    claim_all(net)
    return net.gas


def figures_of(results: dict[str, dict[str, list[int]]]) -> dict[str, object]:
    def med(action: str) -> dict[str, int]:
        return {k: int(statistics.median(r[action])) for k, r in results.items() if r.get(action)}

    settlement = {k: sum(sum(r.get(a, [])) for a in SETTLEMENT) for k, r in results.items()}
    return {
        "commit_update_gas": med("commit_update"),
        "reveal_gas": {k: max(r["reveal_scores"]) for k, r in results.items()},
        "result_post_gas": {k: r["post_result"][0] for k, r in results.items()},
        "finalize_result_gas": {k: r["finalize_result"][0] for k, r in results.items()},
        "round_settlement_gas": settlement,
        "round_settlement_gas_per_miner": {k: settlement[k] // int(k.split("x")[0]) for k in settlement},
        "column_challenge_gas": {k: r["challenge_column"][0] for k, r in results.items() if r.get("challenge_column")},
        # data availability: a demand of one part, and a signer's answers: a column leaf with its
        # path, the validator entries, the claims list (n + V leaves: the largest)
        "demand_gas": {k: r["demand"][0] for k, r in results.items() if r.get("demand")},
        "answer_leaf_gas": {k: r["answer_leaf"][0] for k, r in results.items() if r.get("answer_leaf")},
        "answer_validators_gas": {k: r["answer_validators"][0] for k, r in results.items() if r.get("answer_validators")},
        "answer_claims_gas": {k: r["answer_claims"][0] for k, r in results.items() if r.get("answer_claims")},
        # after the attempt is final (or rejected): the bond to the answerer (or back to the demander)
        "settle_demand_gas": {k: max(r["settle_demand"]) for k, r in results.items() if r.get("settle_demand")},
        # an account's first claim; an account holding no tokens pays ERC-20's new-holder
        # write on top (about 17,000 gas), shown on its own
        "claim_gas": max(g for r in results.values() for g in r.get("claim", [0])),
        "claim_gas_new_token_holder": max(g for r in results.values() for g in r.get("claim_new_holder", [0])),
        "max_function_gas_at_caps": max(g for g in (results.get("1024x64") or {}).get("all", [0])),
        "targets": TARGETS,
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks gas")
    parser.add_argument("--quick", action="store_true", help="only 4x2 and 16x4")
    parser.add_argument("--sizes", help="comma-separated MINERSxVALIDATORS, e.g. 4x2,1024x64")
    parser.add_argument("--json", type=Path, default=Path("out/bench/gas.json"))
    args = parser.parse_args(argv)
    sizes = QUICK if args.quick else SIZES
    if args.sizes:
        sizes = [tuple(int(x) for x in s.split("x")) for s in args.sizes.split(",")]  # type: ignore[misc]
    console = Console()
    results: dict[str, dict[str, list[int]]] = {}
    for n, v in sizes:
        started = time.monotonic()
        console.print(f"[dim]measuring {n} miners x {v} validators…[/dim]")
        gas = measure(n, v)
        gas["all"] = [g for values in gas.values() for g in values]
        results[f"{n}x{v}"] = gas
        write_json(args.json, results)  # the largest sizes take long: keep what is measured
        console.print(f"[dim]  {n}x{v} done in {time.monotonic() - started:.0f} s[/dim]")
    table = Table(title="gas per action (median over the round)")
    table.add_column("action")
    for key in results:
        table.add_column(key, justify="right")
    actions = [a for a in next(iter(results.values())) if a != "all"]
    for action in actions:
        table.add_row(action, *[f"{int(statistics.median(results[k][action])):,}" if results[k].get(action) else "—"
                                for k in results])
    figures = figures_of(results)
    for name in ("round_settlement_gas", "round_settlement_gas_per_miner"):
        table.add_row(f"[bold]{name}[/bold]", *[f"{figures[name][k]:,}" for k in results])  # type: ignore[index]
    console.print(table)
    write_json(args.json, results)
    console.print(f"wrote {args.json}")
    return 0


def write_json(path: Path, results: dict[str, dict[str, list[int]]]) -> None:
    per_action = {k: {a: v for a, v in r.items() if a != "all"} for k, r in results.items()}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"figures": figures_of(results), "per_action": per_action}, indent=2))
