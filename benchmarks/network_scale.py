"""Verification work per validator as the network grows (issue 30): at 16, 100, 1,024 and 10,000
miners with validators at 1/16 of the miners (at least 3), each miner's committee drawn by the real function
(`protocol/core/settlement/committees.py`, c = 3, equal stakes; a validator checks every miner
where it holds one of the 2c drawn seats, backups included), against the rule without committees
(every validator checks every miner of its class; one class here). With c or fewer validators
no committee is in force and every validator checks every miner (16 miners, 3 validators); below
about 2c validators a validator holds a seat of most miners, so the curve saturates there: 100
miners and 6 validators check 66 each where large networks settle near 2c · n / v = 96. Bytes are
what a validator fetches to check its miners: each one's update envelope and, per challenged
segment, its two end checkpoints, at the run's blob caps (the most an honest blob takes) for the
tiny and llama-small presets, at q = 1 (what committees of 3 need to catch a one-segment fake as
often as three validators that all check it: `committee_odds.committee_per_check`). Audits add, per audited validator, `audit_sample` claims (the miner's update and
the ends of its q segments; the score audit reuses the update) and that validator's witness
bundle (100 bytes per miner it checked): every other validator without drawn auditors, the expected number
the real draw gives (`auditor_draw.expected_auditors`, A = 4) with them.

Gas (not with --quick): one scripted round on the embedded chain (`benchmarks/gas.py`, with the
run config's committees of 3) at each of `--gas` sizes within the contracts' bounds: the round's
settlement gas per miner and the most expensive function of the round; its validators score and
reveal only the miners of their drawn seats, as nodes do. A size beyond the bounds (16,384 miners,
256 validators) is reported as null, not estimated.

The aggregation tree (issue 31, `benchmarks/aggregation_tree.py`) at fan-in `--fan-in` (4): the
tree's depth, whether its root equals the flat sum and the numpy reference bit for bit, and per role
the bytes downloaded to form θ_{r+1} with every verified update counted, beside the flat shape's
(every validator downloads every update).

    python -m benchmarks network-scale [--quick] [--gas 1024x64,4096x256] [--fan-in 4] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from benchmarks.aggregation_tree import role_bytes, tree_equals_flat
from protocol.config.run_config import ChainParams
from protocol.core.aggregation.tree import depth
from protocol.core.model.config import preset
from protocol.core.proof.auditor_draw import expected_auditors
from protocol.core.proof.witness_bundle import ENTRY_BYTES
from protocol.core.settlement.committee_odds import committee_per_check
from protocol.core.settlement.committees import assignments
from protocol.core.settlement.result_inputs import MAX_MINERS, MAX_VALIDATORS
from protocol.core.train.compute_config import ComputeConfig
from protocol.core.wire.blob_caps import blob_caps

MINERS = (16, 100, 1_024, 10_000)
SIZE = 3
A = ChainParams().auditors  # drawn auditors per validator
PRESETS = ("tiny", "llama-small")


def validators_for(miners: int) -> int:
    return max(3, miners // 16)


def checks(miners: int) -> dict[str, float]:
    """Miners each validator checks per round: today, and the median and most under committees."""
    v = validators_for(miners)
    seed = miners.to_bytes(32, "big")
    ids = [i.to_bytes(20, "big") for i in range(miners)]
    counts = [len(a) for a in assignments(seed, ids, [1] * v, SIZE)]
    return {"validators": v, "today": miners, "committee_median": statistics.median(counts),
            "committee_max": max(counts)}


def bytes_per_check(name: str, per_check: int) -> int:
    caps = blob_caps(preset(name), ComputeConfig())
    return caps.update + 2 * per_check * caps.checkpoint


def audit_bytes(name: str, miners: int, per_check: int, auditors: int, checked: float) -> int:
    """What one validator fetches to audit the validators it audits: `audit_sample` claims each
    and each one's witness bundle (an entry per miner it `checked`); all others without drawn
    auditors (A = 0)."""
    v = validators_for(miners)
    audited = expected_auditors([1] * v, 0, auditors)  # equal stakes: as many as audit each one
    sample = ChainParams().audit_sample
    return round(audited * (sample * bytes_per_check(name, per_check) + checked * ENTRY_BYTES))


def round_gas(sizes: list[str]) -> dict[str, dict[str, Any]]:
    """Per size (MINERSxVALIDATORS): the round's settlement gas per miner and its most expensive
    function, measured on the embedded chain; None beyond the contracts' bounds."""
    from benchmarks.gas import figures_of, measure  # the chain stack: only when gas is asked for

    per_miner: dict[str, int | None] = {}
    most: dict[str, int | None] = {}
    which: dict[str, str | None] = {}
    for size in sizes:
        n, v = (int(x) for x in size.split("x"))
        if n > MAX_MINERS or v > MAX_VALIDATORS:
            per_miner[size] = most[size] = which[size] = None
            continue
        gas = measure(n, v)
        which[size] = max(gas, key=lambda action: max(gas[action]))
        gas["all"] = [g for values in gas.values() for g in values]
        per_miner[size] = figures_of({size: gas})["round_settlement_gas_per_miner"][size]  # type: ignore[index]
        most[size] = max(gas["all"])
    return {"round_gas_per_miner": per_miner, "max_function_gas": most, "max_function": which}


def tree_figures(sizes: tuple[int, ...], fan_in: int) -> dict[str, dict[str, Any]]:
    """Per miner count: the tree's depth, whether it equals the flat sum and the reference, and
    each role's bytes by preset (printed as a table)."""
    cfg = ComputeConfig(aggregation="exact-sum-v1")
    out: dict[str, dict[str, Any]] = {"bytes": {}, "equal": {}, "depth": {}}
    table = Table(title=f"aggregation tree, fan-in {fan_in}, every verified update counted: MB downloaded per round to "
                        "form θ_{r+1} (tiny / llama-small)")
    for column in ("miners", "depth", "tree = flat = reference", "miner", "validator (median)", "validator (busiest)",
                   "largest node", "validator, flat"):
        table.add_column(column, justify="right")
    for n in sizes:
        v = validators_for(n)
        roles = {name: role_bytes(n, v, fan_in, name, cfg) for name in PRESETS}
        out["bytes"][str(n)] = {"miner": {name: roles[name]["miner"] for name in PRESETS},
                                "aggregator": {name: roles[name]["aggregator_most"] for name in PRESETS},
                                "validator_tree": {name: {"median": roles[name]["validator_tree_median"],
                                                          "most": roles[name]["validator_tree_most"],
                                                          "flat": roles[name]["validator_flat"]} for name in PRESETS}}
        out["equal"][str(n)] = tree_equals_flat(n, fan_in)
        out["depth"][str(n)] = depth(n, fan_in)
        table.add_row(f"{n:,}", str(out["depth"][str(n)]), "yes" if out["equal"][str(n)] else "NO",
                      *(" / ".join(f"{roles[name][key] / 1e6:,.1f}" for name in PRESETS)
                        for key in ("miner", "validator_tree_median", "validator_tree_most", "aggregator_most",
                                    "validator_flat")))
    Console(width=160).print(table)
    return out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks network-scale", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="up to 1,024 miners")
    parser.add_argument("--gas", default="1024x64,4096x256", help="sizes whose round gas is measured (not with --quick; none: no gas)")
    parser.add_argument("--fan-in", type=int, default=4, help="the aggregation tree's fan-in")
    parser.add_argument("--json", type=Path, default=Path("out/bench/network_scale.json"))
    args = parser.parse_args(argv)
    sizes = MINERS[:3] if args.quick else MINERS
    q = committee_per_check(SIZE, ComputeConfig().n_segments)
    per_check = {name: {"today": bytes_per_check(name, 1), "committee": bytes_per_check(name, q)} for name in PRESETS}
    checks_per_validator, bytes_per_node = {}, {}
    table = Table(title=f"per validator per round: miners checked and MB fetched to check them (c = {SIZE} seats and "
                        f"{SIZE} backups drawn, q = {q}, {A} drawn auditors; MB for the median validator, audits included)")
    for column in ("miners", "validators", "checks today", "checks, committee (median / most)",
                   *(f"MB {n} today / committee" for n in PRESETS)):
        table.add_column(column, justify="right")
    for n in sizes:
        c = checks(n)
        checks_per_validator[str(n)] = c
        audits = {name: {"today": audit_bytes(name, n, 1, 0, n), "committee": audit_bytes(name, n, q, A, c["committee_median"])}
                  for name in PRESETS}
        bytes_per_node[str(n)] = {"validator": {name: {
            "today": c["today"] * per_check[name]["today"] + audits[name]["today"],
            "committee": c["committee_median"] * per_check[name]["committee"] + audits[name]["committee"],
            "committee_most": c["committee_max"] * per_check[name]["committee"] + audits[name]["committee"],
            "audits_today": audits[name]["today"], "audits_committee": audits[name]["committee"]}
            for name in PRESETS}}
        mb = [f"{b['today'] / 1e6:,.0f} / {b['committee'] / 1e6:,.0f}" for b in bytes_per_node[str(n)]["validator"].values()]
        table.add_row(f"{n:,}", str(c["validators"]), f"{c['today']:,}", f"{c['committee_median']:.0f} / {c['committee_max']}",
                      *mb)
    Console(width=160).print(table)
    tree = tree_figures(sizes, args.fan_in)
    for n in sizes:
        bytes_per_node[str(n)].update(tree["bytes"][str(n)])
    gas = {} if args.quick or args.gas == "none" else round_gas(args.gas.split(","))
    if gas:
        table = Table(title=f"settlement gas of one round (bounds: {MAX_MINERS:,} miners, {MAX_VALIDATORS} validators)")
        for column in ("miners x validators", "round gas per miner (target <= 20,000)", "most expensive function (<= 15M)"):
            table.add_column(column, justify="right")
        for size, per_miner in gas["round_gas_per_miner"].items():
            most = gas["max_function_gas"][size]
            table.add_row(size, "beyond the bounds" if per_miner is None else f"{per_miner:,}",
                          "beyond the bounds" if most is None else f"{most:,} ({gas['max_function'][size]})")
        Console(width=160).print(table)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"committee_size": SIZE, "per_check": q, "figures": {
        "checks_per_validator": checks_per_validator, "bytes_per_node": bytes_per_node,
        "tree_equals_flat": tree["equal"], "tree_depth": tree["depth"], "fan_in": args.fan_in, **gas}}, indent=2) + "\n")
    return 0
