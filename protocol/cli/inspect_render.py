"""Rich tables for `veritrain inspect` (the JSON form prints the same dicts)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from protocol.config.run_config import TOKEN_UNIT


def tokens(amount: int | None) -> str:
    return "—" if amount is None else f"{amount / TOKEN_UNIT:,.4f}"


def short(value: str | None, keep: int = 10) -> str:
    if not value:
        return "—"
    return value if len(value) <= keep + 4 else f"{value[:keep]}…"


def _kv_table(title: str, rows: list[tuple[str, str]]) -> Table:
    table = Table(title=title, show_header=False)
    table.add_column("key", style="bold")
    table.add_column("value")
    for key, value in rows:
        table.add_row(key, value)
    return table


def render_summary(console: Console, data: dict[str, Any]) -> None:
    t, tot = data["token"], data["totals"]
    console.print(_kv_table("deployment", [
        ("chain id", str(data["chain_id"])), ("rounds", data["contracts"]["rounds"]),
        ("run config", short(data["run_config_hash"], 16)), ("current round", str(data["current_round"])),
        ("miners / eligible", f"{data['miners']} / {data['eligible_miners']}"), ("validators", str(data["validators"])),
    ]))
    console.print(_kv_table("tokens", [
        ("total supply", tokens(t["total_supply"])), ("minted (emission)", tokens(t["minted"])),
        ("slashed", tokens(t["slashed"])), ("forfeited rewards burned", tokens(t["forfeited_burned"])),
        ("staked", tokens(tot["staked"])), ("unbonding", tokens(tot["unbonding"])),
        ("claimable", tokens(tot["claimable"])), ("held back", tokens(tot["held"])),
        ("report bonds", tokens(tot["report_bonds"])),
    ]))


def render_rounds(console: Console, rows: list[dict[str, Any]]) -> None:
    table = Table(title="rounds")
    for col in ("round", "phase", "commits", "active", "model hash", "held-out loss", "minted", "revealed"):
        table.add_column(col)
    for r in rows:
        loss = "genesis" if r["heldout_loss"] is None else f"{r['heldout_loss']:.4f}"
        table.add_row(str(r["round"]), r["phase"], str(r["commits"]), str(r["active_miners"]),
                      short(r["model_hash"]), loss, tokens(r["minted"]), str(r["validators_revealed"]))
    console.print(table)


def render_round(console: Console, data: dict[str, Any]) -> None:
    console.print(_kv_table(f"round {data['round']}", [
        ("phase", data["phase"]), ("seed", short(data["seed"], 18)), ("model", short(data["model_hash"], 18)),
        ("next model", short(data["next_model_hash"], 18)), ("next held-out loss", f"{data['next_heldout_loss']:.4f}"),
    ]))
    miners = Table(title="miners")
    for col in ("miner", "update", "consensus", "reward", "held", "reputation"):
        miners.add_column(col)
    for m in data["miners"]:
        miners.add_row(m["address"], short(m["update_hash"]), _score(m["consensus"]), tokens(m["reward"]),
                       "yes" if m["held"] else "", _score(m["reputation"]))
    console.print(miners)
    vals = Table(title="validators")
    for col in ("validator", "stake weight", "revealed", "agreement", "reward", "scores"):
        vals.add_column(col)
    for v in data["validators"]:
        agreement = "—" if v["agreement"] is None else f"{v['agreement']:.3f}"
        vals.add_row(v["address"], tokens(v["weight"]), "yes" if v["revealed"] else "no", agreement,
                     tokens(v["reward"]), " ".join(_score(s) for s in v["scores"]))
    console.print(vals)
    if data["reports"]:
        render_disputes(console, data["reports"])


def render_node(console: Console, data: dict[str, Any]) -> None:
    console.print(_kv_table(f"node {data['address']}", [
        ("role", data["role"] or "unregistered"), ("node key", short(data["node_key"], 18)),
        ("multiaddr", data["multiaddr"] or "—"), ("token balance", tokens(data["token_balance"])),
        ("staked", tokens(data["staked"])), ("unbonding", tokens(data["unbonding"])),
        ("eligible", "yes" if data["eligible"] else "no"), ("reputation", _score(data["reputation"])),
        ("claimable", tokens(data["claimable"])), ("claimed", tokens(data["claimed"])),
        ("slashed", tokens(data["slashed"])), ("open reports", str(data["open_reports"])),
    ]))
    if data["rounds"]:
        table = Table(title="rounds as miner")
        for col in ("round", "consensus", "reward", "held"):
            table.add_column(col)
        for r in data["rounds"]:
            table.add_row(str(r["round"]), _score(r["consensus"]), tokens(r["reward"]), "yes" if r["held"] else "")
        console.print(table)


def render_disputes(console: Console, rows: list[dict[str, Any]]) -> None:
    table = Table(title="disputes")
    for col in ("id", "round", "miner", "kind", "segment", "status", "votes", "slashed"):
        table.add_column(col)
    for d in rows:
        table.add_row(str(d["id"]), str(d["round"]), d["miner"], d["kind"], str(d["segment"]), d["status"],
                      str(d["votes"]), tokens(d["slashed"]))
    console.print(table)


def _score(value: int | None) -> str:
    return "—" if value is None else f"{value / 65535:.3f}"
