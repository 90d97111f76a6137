"""The devnet's report: report.json (schema in docs/OPERATORS.md §1), PNG plots, a settlement table."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from protocol.chain.client import ChainClient, ReportStatus, Role
from protocol.chain.events import read_many
from protocol.chain.settlement_history import SettlementHistory
from protocol.config.run_config import TOKEN_UNIT
from protocol.config.run_setup import resolve
from protocol.core.settlement.committees import drawn_seats, in_force
from protocol.core.settlement.fraud import FraudKind
from protocol.core.settlement.loss_scale import LOSS_SCALE
from protocol.core.settlement.result_inputs import RoundInputs

SCORE_SCALE = 65535
PIPED_WIDTH = 1000  # columns when stdout is no terminal: rich's default 80 would cut the addresses
REPUTATION_NOTE = ("reputation: a miner's moving average of its consensus scores, rep = (9·prev + c)/10 "
                   "(docs/PROTOCOL.md §11), which sets its peer rate limits; validators have none (—).")
NODE_COLORS = {"miner": "tab:blue", "validator": "tab:green", "slashed": "tab:red"}  # nodes.png; its legend in this order


def _tokens(amount: int) -> float:
    return amount / TOKEN_UNIT


def build_report(admin: ChainClient, members: list[Any], config: dict[str, Any], rounds: int) -> dict[str, Any]:
    logs = read_many(admin, [("disputes", "FraudResolved"), ("staking", "Slashed")])
    resolved = {row["report_id"]: row for row in logs[("disputes", "FraudResolved")]}
    reports = [admin.report(rid) | {"id": rid} for rid in range(1, admin.read.disputes.report_count() + 1)]
    history = SettlementHistory(admin)  # every figure below is rebuilt from chain data
    out_rounds = []
    setup = resolve(admin.deployment.run_config)
    full_steps = setup.compute.inner_steps
    config = {**config, "vocab_size": setup.model.vocab_size}  # for the plot's uniform-guess loss, ln V
    for r in range(rounds):
        settled = history.final(r)
        info = admin.round_info(r)
        miners = []
        for m in (m for m in members if m.role == Role.MINER):
            committed = admin.read.rounds.has_committed(r, m.address)
            against = [rep for rep in reports if rep["round"] == r and rep["miner"] == m.address]
            confirmed = [rep for rep in against if rep["status"] == 2]
            res = settled.result if settled else None
            column = settled.inputs.miners.index(m.address) if settled and m.address in settled.inputs.miners else None
            miners.append({
                "address": m.address, "kind": m.kind, "committed": committed,
                # capacity-scaled work: the inner steps it committed to (null: nothing committed)
                "steps": (admin.read.rounds.commit_steps(r, m.address) or full_steps) if committed else None,
                # hardware classes: its class, and whether validators of that class checked it bit for bit
                # ("exact") or nobody held it and every validator checked it within δ ("tolerance", discounted)
                "class": getattr(m, "class_label", None),
                "stage": getattr(m, "stage", None),  # a staged run's stage miner: its stage
                "check": ("exact" if settled.inputs.exact_column(column) else "tolerance")
                if settled and column is not None else None,
                # check committees: the validators whose seats decided its column, and how many each held
                "committee": _committee(settled.inputs, column) if settled and column is not None else None,
                # and the 2C seats drawn for it in seat order (committee, then backups): a seat whose
                # validator was silent or caught passes to the next
                "drawn": _drawn(settled.inputs, column) if settled and column is not None else None,
                # verified: its proof held (no report against it was confirmed); null: nothing committed
                "verified": (not confirmed) if committed else None,
                "score": res.consensus[column] / SCORE_SCALE if res and column is not None else 0.0,
                "reward": _tokens(res.pay[column]) if res and column is not None else 0.0,
                "slashed": _tokens(sum(resolved[rep["id"]]["slashed"] for rep in confirmed if rep["id"] in resolved)),
            })
        out_rounds.append({"round": r, "fallback": admin.fallback(r),
                           # seconds from the round's opening to its commit phase's close (early or at the deadline)
                           "commit_s": info["commit_closed_time"] - info["start_time"] if info["commit_closed_time"] else None,
                           # the median of the losses validators revealed for the model round r trained
                           "heldout_loss": settled.result.heldout_loss / LOSS_SCALE if settled else None,
                           "model_hash": "0x" + admin.read.rounds.model_hash(r + 1).hex(), "miners": miners})
    slashes = logs[("staking", "Slashed")]
    final = []
    for m in members:
        latest = history.latest_entry(m.address)
        entry = latest[1].entry_of(m.address) if latest else None
        earned = entry.cumulative if entry else 0
        claimed = admin.read.rewards.claimed(m.address)
        final.append({
            "address": m.address, "role": m.role.name.lower(), "kind": m.kind, "stage": getattr(m, "stage", None),
            "stake": _tokens(admin.read.staking.stake_of(m.address) + admin.read.staking.unbonding_of(m.address)),
            "reputation": (entry.reputation if entry else 0) / SCORE_SCALE,
            "earned": _tokens(earned),
            "claimable": _tokens(earned - claimed),
            "claimed": _tokens(claimed),
            "slashed": _tokens(sum(s["amount"] for s in slashes if s["account"] == m.address)),
        })
    return {"config": config, "rounds": out_rounds, "final": final, "reports": _reports(reports, resolved)}


def _committee(inputs: RoundInputs, column: int) -> dict[str, int] | None:
    """{validator: seats} of the column's committee; None when no committee decides it (none in
    the run, or no more deciders than seats)."""
    deciders = inputs.deciders(column)
    if not in_force(inputs.committee_size, [w if d else 0 for w, d in zip(inputs.weights, deciders, strict=True)]):
        return None
    weights = inputs.column_weights(column).weights
    return {v: w for v, w in zip(inputs.validators, weights, strict=True) if w}


def _drawn(inputs: RoundInputs, column: int) -> list[str] | None:
    """The validators holding the column's drawn seats, in seat order; None when no committee decides it."""
    eligible = [w if d else 0 for w, d in zip(inputs.weights, inputs.deciders(column), strict=True)]
    if not in_force(inputs.committee_size, eligible):
        return None
    seats = drawn_seats(inputs.seed, bytes.fromhex(inputs.miners[column][2:]), eligible, inputs.committee_size)
    return [inputs.validators[v] for v in seats]


def _reports(reports: list[dict[str, Any]], resolved: dict[int, dict[str, Any]]) -> list[dict[str, Any]]:
    """Every fraud report: who accused whom of what, and how it ended (the bond burned or not)."""
    out = []
    for rep in reports:
        end = resolved.get(rep["id"], {})
        out.append({"id": rep["id"], "round": rep["round"], "accused": rep["miner"], "reporter": rep["reporter"],
                    "kind": FraudKind(rep["kind"]).name.lower(), "status": ReportStatus(rep["status"]).name.lower(),
                    "slashed": _tokens(end.get("slashed", 0)), "bond_burned": _tokens(end.get("bond_burned", 0))})
    return out


def write_report(report: dict[str, Any], out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.json").write_text(json.dumps(report, indent=2, sort_keys=True))
    return [out / "report.json", *_plots(report, out)]


def _plots(report: dict[str, Any], out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    for name, figure in (("heldout_loss.png", loss_figure(report)), ("nodes.png", nodes_figure(report))):
        figure.savefig(out / name, dpi=110, bbox_inches="tight")  # rotated names stay whole
        plt.close(figure)
        paths.append(out / name)
    return paths


def loss_figure(report: dict[str, Any]) -> Any:
    """Held-out loss per round on whole-round ticks, against the loss of a uniform guess over
    the vocabulary, ln V nats: a model below that line has learned something."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    rounds = [r["round"] for r in report["rounds"]]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot(rounds, [r["heldout_loss"] if r["heldout_loss"] is not None else float("nan") for r in report["rounds"]],
            marker="o", label="held-out loss (median revealed)")
    vocab = report["config"].get("vocab_size")  # absent from reports written before it was recorded
    if vocab:
        ax.axhline(math.log(vocab), color="tab:gray", linestyle="--",
                   label=f"uniform guess: ln {vocab} = {math.log(vocab):.2f}")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # rounds are whole
    ax.set(xlabel="round", ylabel="held-out loss (nats)", title="global model quality per round")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def nodes_figure(report: dict[str, Any]) -> Any:
    """Claimed rewards, stake and reputation per node, named as the settlement table names them."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    final, names = report["final"], node_names(report["final"])
    colors = [NODE_COLORS["slashed"] if f["slashed"] > 0 else NODE_COLORS[f["role"]] for f in final]
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.8))
    for ax, key, title in zip(axes, ("claimed", "stake", "reputation"),
                              ("rewards claimed (tokens)", "stake (tokens)", "reputation (miners only)"), strict=True):
        # a validator has no reputation: no bar rather than a 0 that reads as a score
        values = [float("nan") if key == "reputation" and f["role"] != "miner" else f[key] for f in final]
        ax.bar(range(len(final)), values, color=colors)
        ax.set_xticks(range(len(final)), names, rotation=45, ha="right", fontsize=7)
        ax.set_title(title)
    fig.legend(handles=[Patch(color=c, label=label) for label, c in NODE_COLORS.items()], loc="upper right", ncol=3,
               fontsize=8)
    fig.tight_layout(rect=(0, 0, 1, 0.92))  # room above the panels for the legend
    return fig


def node_names(final: list[dict[str, Any]]) -> list[str]:
    """Each node's devnet name, `miner0` ... `validator4`: its logger's name in devnet.log
    (protocol/devnet/network.py numbers the members in the order `final` lists them)."""
    return [f"{f['role']}{i}" for i, f in enumerate(final)]


def render_settlement(console: Console, report: dict[str, Any]) -> None:
    if not console.is_terminal:  # piped: as wide as the tables, so no address is cut
        console = Console(file=console.file, width=PIPED_WIDTH)
    losses = Table(title="rounds")
    for col in ("round", "held-out loss", "model", "committed", "verified", "rewards"):
        losses.add_column(col)
    for r in report["rounds"]:
        ms = r["miners"]
        losses.add_row(str(r["round"]), f"{r['heldout_loss']:.4f}" if r["heldout_loss"] is not None else "-", r["model_hash"][:12],
                       str(sum(m["committed"] for m in ms)), str(sum(bool(m["verified"]) for m in ms)),
                       f"{sum(m['reward'] for m in ms):,.2f}")
    console.print(losses)
    table = Table(title="settlement", caption=REPUTATION_NOTE, caption_justify="left")
    for col in ("node", "address", "role", "kind", "stake", "reputation", "claimed", "claimable", "slashed"):
        table.add_column(col)
    for name, f in zip(node_names(report["final"]), report["final"], strict=True):
        style = "red" if f["slashed"] > 0 else None
        reputation = f"{f['reputation']:.3f}" if f["role"] == "miner" else "—"
        table.add_row(name, f["address"], f["role"], f["kind"], f"{f['stake']:,.2f}", reputation,
                      f"{f['claimed']:,.2f}", f"{f['claimable']:,.2f}", f"{f['slashed']:,.2f}", style=style)
    console.print(table)
    flagged = sorted({(m["address"], m["class"]) for r in report["rounds"] for m in r["miners"] if m["check"] == "tolerance"})
    for address, cls in flagged:  # hardware classes: nobody held its class, so everyone checked it within δ
        console.print(f"[yellow]tolerance-checked[/yellow] {address} (class {cls or 'default'}: no validator holds it; "
                      "scores discounted)")
