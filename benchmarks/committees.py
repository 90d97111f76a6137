"""Check committees' odds (issue 30, first step): the chance a coalition holding 10 %, 20 % and
33 % of the validator stake takes a majority of a miner's committee of c = 3, 5, 7 seats, exact
(the binomial tail: seats are drawn by stake unit with replacement) beside the frequency in the
real draw (`protocol/core/settlement/committees.py`, one committee per miner, the coalition's
stake split over 3 accounts and the rest over 17); and the segments each committee member must
challenge for a committee to catch a one-segment fake as often as every validator does today.

    python -m benchmarks committees [--quick] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
from fractions import Fraction
from pathlib import Path

from rich.console import Console
from rich.table import Table

from protocol.core.settlement.committee_odds import (
    p_committee_catches,
    p_majority,
    per_check_matching,
)
from protocol.core.settlement.committees import committee

SHARES = (Fraction(1, 10), Fraction(1, 5), Fraction(1, 3))
SIZES = (3, 5, 7)


def stakes(share: Fraction, total: int = 105_000) -> list[int]:
    """The coalition's stake over 3 uneven accounts first, the rest over 17 uneven ones."""
    bloc = int(total * share)
    coalition = [bloc // 2, bloc // 3, bloc - bloc // 2 - bloc // 3]
    others = [(total - bloc) // 17 + (i - 8) * 3 for i in range(16)]
    return coalition + others + [total - bloc - sum(others)]


def measured(share: Fraction, size: int, miners: int) -> float:
    weights = stakes(share)
    seed = b"\x07" * 32
    taken = sum(sum(v < 3 for v in committee(seed, i.to_bytes(20, "big"), weights, size)) > size // 2
                for i in range(miners))
    return taken / miners


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks committees", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="2,000 committees per cell instead of 20,000")
    parser.add_argument("--json", type=Path, default=Path("out/bench/committees.json"))
    args = parser.parse_args(argv)
    miners = 2_000 if args.quick else 20_000
    capture: dict[str, dict[str, dict[str, float]]] = {}
    table = Table(title=f"a coalition's chance of a committee majority: exact / the real draw ({miners:,} miners)")
    table.add_column("stake share")
    for c in SIZES:
        table.add_column(f"c = {c}", justify="right")
    for share in SHARES:
        row = {}
        for c in SIZES:
            row[str(c)] = {"exact": float(p_majority(share, c)), "measured": measured(share, c, miners)}
        capture[f"{float(share):.2f}"] = row
        table.add_row(f"{float(share):.0%}", *(f"{v['exact']:.4f} / {v['measured']:.4f}" for v in row.values()))
    Console().print(table)
    detection: dict[str, dict[str, float | int]] = {}
    table = Table(title="catching a one-segment fake (10 segments): every validator at q = 1 vs a committee of 3")
    for column in ("validators", "today (q = 1 each)", "committee at q = 1", "q it needs", "committee at that q"):
        table.add_column(column, justify="right")
    for v in (3, 6, 12):
        weights = [1] * v
        today = 1 - (Fraction(9, 10)) ** v
        q = per_check_matching(weights, 3, 10, 1)
        detection[str(v)] = {"today": float(today), "committee_q1": float(p_committee_catches(weights, 3, 10, 1)),
                             "q_needed": q, "committee_at_q": float(p_committee_catches(weights, 3, 10, q))}
        d = detection[str(v)]
        table.add_row(str(v), f"{d['today']:.3f}", f"{d['committee_q1']:.3f}", str(q), f"{d['committee_at_q']:.3f}")
    Console().print(table)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"miners": miners, "figures": {"capture": capture, "detection": detection}},
                                    indent=2) + "\n")
    return 0
