"""Rich tables for `veritrain inspect` (the JSON form prints the same dicts). Each renderer gets
the chain's `now`, so that a deadline reads as a local time and the time left until it, and
`exact`: token amounts round to 4 decimals unless it is set (`inspect --exact`)."""

from __future__ import annotations

from functools import partial
from typing import Any

from rich.console import Console
from rich.table import Table

from protocol.cli import human

PIPED_WIDTH = 1000  # columns when stdout is no terminal: rich's default 80 would cut or wrap addresses
REPUTATION_NOTE = ("reputation: a miner's moving average of its consensus scores, rep = (9·prev + c)/10 "
                   "(docs/PROTOCOL.md §11); it sets the miner's peer rate limits. Validators have none.")


def wide(console: Console) -> Console:
    """`console` on a terminal; piped or redirected, one as wide as the tables, so no column is
    cut and each row stays one line for grep and cut."""
    return console if console.is_terminal else Console(file=console.file, width=PIPED_WIDTH)


def tokens(amount: int | None, exact: bool = False) -> str:
    """A token amount with thousands separators: rounded to 4 decimals (`human.rounded_tokens`),
    or with `exact` every significant decimal of the 18."""
    if amount is None:
        return "—"
    return human.tokens(amount, grouped=True) if exact else human.rounded_tokens(amount, grouped=True)


def at(ts: int | None, now: int) -> str:
    """A chain time as local date and time and how far from now; `—` when unset (0)."""
    return human.when(ts, now) if ts else "—"


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


def render_summary(console: Console, data: dict[str, Any], now: int, exact: bool = False) -> None:
    t, tot, tokens = data["token"], data["totals"], _amounts(exact)
    console.print(_kv_table("deployment", [
        ("chain id", str(data["chain_id"])), ("rounds", data["contracts"]["rounds"]),
        ("run config", short(data["run_config_hash"], 16)), ("current round", str(data["current_round"])),
        ("miners / eligible", f"{data['miners']} / {data['eligible_miners']}"), ("validators", str(data["validators"])),
    ]))
    console.print(_kv_table("tokens", [
        ("total supply", tokens(t["total_supply"])), ("minted (emission)", tokens(t["minted"])),
        ("slashed", tokens(t["slashed"])),
        ("staked", tokens(tot["staked"])), ("unbonding", tokens(tot["unbonding"])),
        ("claimed", tokens(tot["claimed"])), ("minted, not yet claimed", tokens(tot["unclaimed"])),
        ("report bonds", tokens(tot["report_bonds"])),
    ]))


def render_rounds(console: Console, rows: list[dict[str, Any]], now: int, exact: bool = False) -> None:
    table, tokens = Table(title="rounds"), _amounts(exact)
    for col in ("round", "phase", "commits", "active", "model hash", "held-out loss", "minted", "revealed", "result"):
        table.add_column(col)
    for r in rows:
        loss = "—" if r["heldout_loss"] is None else f"{r['heldout_loss']:.4f}"
        table.add_row(str(r["round"]), r["phase"], str(r["commits"]), str(r["active_miners"]),
                      short(r["model_hash"]), loss, tokens(r["minted"]), str(r["validators_revealed"]),
                      _result(r["result"], r["fallback"]))
    console.print(table)


def render_round(console: Console, data: dict[str, Any], now: int, exact: bool = False) -> None:
    tokens = _amounts(exact)
    console.print(_kv_table(f"round {data['round']}", [
        ("phase", data["phase"]), ("seed", short(data["seed"], 18)), ("model", short(data["model_hash"], 18)),
        ("next model", short(data["next_model_hash"], 18)),
        *timeline(data, now),
        ("held-out loss", "—" if data["heldout_loss"] is None else f"{data['heldout_loss']:.4f}"),
        ("result", _result(data["result"], False)),
    ]))
    miners = Table(title="miners", caption=REPUTATION_NOTE if data["miners"] else None, caption_justify="left")
    for col in ("column", "miner", "update", "steps", "class", "check", "consensus", "reward", "reputation",
                "cumulative"):
        miners.add_column(col)
    for m in data["miners"]:
        check = m["check"] or "—"
        miners.add_row(str(m["column"]), m["address"], short(m["update_hash"]), str(m["steps"] or "H"),
                       ", ".join(m["hardware_class"]) or "—",
                       f"[yellow]{check} (flagged)[/yellow]" if check == "tolerance" else check,
                       _score(m["consensus"]),
                       tokens(m["reward"]), _score(m["reputation"]), tokens(m["cumulative"]))
    console.print(miners)
    vals = Table(title="validators")
    for col in ("validator", "stake weight", "revealed", "reward", "cumulative", "scores"):
        vals.add_column(col)
    for v in data["validators"]:
        vals.add_row(v["address"], tokens(v["weight"]), "yes" if v["revealed"] else "no",
                     tokens(v["reward"]), tokens(v["cumulative"]), " ".join(_score(s) for s in v["scores"]))
    console.print(vals)
    if data["result"]["roots"]:
        roots = Table(title="result roots")
        for col in ("attempt", "root", "status", "posted", "non-signers"):
            roots.add_column(col)
        for root in data["result"]["roots"]:
            roots.add_row(str(root["attempt"]), short(root["root"], 18), root["status"], at(root["posted_time"], now),
                          str(len(root["non_signers"])))
        console.print(roots)
    if data["reports"]:
        render_disputes(console, data["reports"], now, exact)


def timeline(data: dict[str, Any], now: int) -> list[tuple[str, str]]:
    """A round's phases in the order they ran: when each closed, or its deadline while open
    (an early close comes before the deadline, which would read as in the future)."""
    rows = []
    for phase in ("commit", "score", "reveal", "audit", "result"):
        closed = data["closed"][phase]
        if closed:
            rows.append(("ended" if phase == "result" else f"{phase} closed", at(closed, now)))
        else:
            rows.append((f"{phase} deadline", at(data[f"{phase}_deadline"], now)))
    return rows


def render_node(console: Console, data: dict[str, Any], now: int, exact: bool = False) -> None:
    tokens = _amounts(exact)
    miner = data["role"] == "miner"  # reputation is a miner's alone
    console.print(_kv_table(f"node {data['address']}", [
        ("role", data["role"] or "unregistered"), ("node key", short(data["node_key"], 18)),
        ("multiaddr", data["multiaddr"] or "—"), ("hardware classes", ", ".join(data["hardware_classes"]) or "—"),
        ("token balance", tokens(data["token_balance"])),
        ("staked", tokens(data["staked"])), ("unbonding", tokens(data["unbonding"])),
        ("withdrawable from", at(data["unbond_release_time"], now) if data["unbonding"] else "—"),
        ("eligible", "yes" if data["eligible"] else "no"),
        ("reputation", _score(data["reputation"]) if miner else "— (miners only: validators have none)"),
        ("earned (cumulative)", tokens(data["cumulative_earned"])),
        ("claimable", tokens(data["claimable"])), ("claimed", tokens(data["claimed"])),
        ("slashed", tokens(data["slashed"])), ("open reports", str(data["open_reports"])),
    ]))
    if data["rounds"]:
        table = Table(title="rounds")
        for col in ("round", "consensus", "reward", "cumulative"):
            table.add_column(col)
        for r in data["rounds"]:
            table.add_row(str(r["round"]), _score(r.get("consensus")), tokens(r["reward"]), tokens(r["cumulative"]))
        console.print(table)


def render_disputes(console: Console, rows: list[dict[str, Any]], now: int, exact: bool = False) -> None:
    table, tokens = Table(title="disputes"), _amounts(exact)
    for col in ("id", "round", "miner", "kind", "segment", "status", "vote deadline", "votes", "slashed"):
        table.add_column(col)
    for d in rows:
        table.add_row(str(d["id"]), str(d["round"]), d["miner"], d["kind"], str(d["segment"]), d["status"],
                      at(d["deadline"], now), str(d["votes"]), tokens(d["slashed"]))
    console.print(table)


def _result(result: dict[str, Any], fallback: bool) -> str:
    if fallback:
        return "fallback"
    if result["final_root"]:
        return "final " + short(result["final_root"])
    statuses = [r["status"] for r in result["roots"]]
    return statuses[-1] if statuses else "—"


def _amounts(exact: bool) -> partial[str]:
    """`tokens`, exact or rounded, for one view."""
    return partial(tokens, exact=exact)


def _score(value: int | None) -> str:
    return "—" if value is None else f"{value / 65535:.3f}"
