"""Gas of every settlement action and of a whole round, on the embedded chain.

    python -m benchmarks gas [--quick] [--json PATH]

Sizes (miners x validators): 4x2, 16x4, 64x8 (--quick: 4x2 and 16x4). One round each:
commits, seed, score commit/reveal (with a replay witness and σ per miner), the audit
close, one fraud report with votes and resolution, finalize, attestation of the next model,
claims.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
from collections import defaultdict
from pathlib import Path

from rich.console import Console
from rich.table import Table

from protocol.chain.backend import connect, dev_account
from protocol.chain.client import ChainClient, Vote
from protocol.chain.commitments import score_commitment, sort_miners
from protocol.chain.deploy import deploy
from protocol.chain.scripted import join_network
from protocol.config.run_config import ChainParams, RunConfig
from protocol.core.fraud import FraudKind

SIZES = [(4, 2), (16, 4), (64, 8)]


def measure(n_miners: int, n_validators: int) -> dict[str, list[int]]:
    handle = connect(None)
    deployer = dev_account(handle)
    config = RunConfig(chain=ChainParams(max_validator_permits=max(8, n_validators)))
    client = ChainClient(handle, deploy(handle, deployer, config), deployer)
    net = join_network(client, n_miners, n_validators, lambda _m: None)
    gas: dict[str, list[int]] = defaultdict(list)
    gas["start"].append(client.start()["gasUsed"])
    for m in net.miners:
        digest = hashlib.sha256(m.address.encode()).digest()
        gas["commit_update"].append(m.client.commit_update(0, digest, digest[::-1])["gasUsed"])
    validators = [v.client for v in net.validators]
    gas["store_seed"].append(validators[0].store_seed(0)["gasUsed"])
    miners = sort_miners([m.address for m in net.miners])
    salt = b"\x05" * 32
    scores = [(1000 + 997 * i) % 65536 for i in range(len(miners))]
    witnesses = [hashlib.sha256(b"witness" + m.encode()).digest() for m in miners]
    sigs = [hashlib.sha512(b"sig" + m.encode()).digest() for m in miners]
    for v in validators:
        commitment = score_commitment(handle.chain_id, client.scores.address, v.address, 0, miners, scores,
                                      witnesses, sigs, salt)
        gas["commit_scores"].append(v.commit_scores(0, commitment)["gasUsed"])
    before = handle.w3.eth.block_number
    rid = validators[0].report_fraud(0, miners[0], FraudKind.REPLAY, 1, b"\x09" * 32, b"\x01" * 64)
    gas["report_fraud"].append(_last_gas(handle, before, "report_fraud"))
    for v in validators[1:]:
        gas["vote_fraud"].append(v.vote_fraud(rid, Vote.CONFIRM)["gasUsed"])
    for v in validators:
        gas["reveal_scores"].append(v.reveal_scores(0, miners, scores, witnesses, sigs, salt)["gasUsed"])
    for v in validators:
        gas["audits_done"].append(v.audits_done(0)["gasUsed"])
    gas["resolve_fraud"].append(client.resolve_fraud(rid)["gasUsed"])  # every validator voted
    gas["finalize"].append(client.finalize(0)["gasUsed"])
    for v in validators:
        gas["attest_model"].append(v.attest_model(1, b"\x33" * 32, 2_000_000)["gasUsed"])
    for p in [*net.miners, *net.validators]:
        if p.client.call("rewards", "claimable", p.address):
            gas["claim"].append(p.client.claim()["gasUsed"])
    return dict(gas)


def _last_gas(handle, since_block: int, label: str) -> int:
    block = handle.w3.eth.get_block("latest", full_transactions=True)
    if block.number <= since_block:
        raise RuntimeError(f"no block for {label}")
    return int(handle.w3.eth.get_transaction_receipt(block.transactions[-1]["hash"])["gasUsed"])


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks gas")
    parser.add_argument("--quick", action="store_true", help="skip the 64x8 size")
    parser.add_argument("--json", type=Path, default=Path("out/bench/gas.json"))
    args = parser.parse_args(argv)
    sizes = SIZES[:2] if args.quick else SIZES
    results = {}
    console = Console()
    for n, v in sizes:
        console.print(f"[dim]measuring {n} miners x {v} validators…[/dim]")
        results[f"{n}x{v}"] = measure(n, v)
    table = Table(title="gas per action (median over the round; total = whole round)")
    table.add_column("action")
    for key in results:
        table.add_column(key, justify="right")
    actions = list(next(iter(results.values())).keys())
    for action in actions:
        table.add_row(action, *[f"{int(statistics.median(results[k][action])):,}" if results[k].get(action) else "—"
                                for k in results])
    totals = {k: sum(sum(vals) for vals in r.values()) for k, r in results.items()}
    table.add_row("[bold]round total[/bold]", *[f"{totals[k]:,}" for k in results])
    console.print(table)
    figures = {
        "commit_update_gas": {k: int(statistics.median(r["commit_update"])) for k, r in results.items()},
        "finalize_gas": {k: r["finalize"][0] for k, r in results.items()},
        "reveal_scores_gas_max": {k: max(r["reveal_scores"]) for k, r in results.items()},
        "round_total_gas": totals,
        "commit_update_target": 60_000,
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"figures": figures, "per_action": results}, indent=2))
    console.print(f"wrote {args.json}")
    return 0
