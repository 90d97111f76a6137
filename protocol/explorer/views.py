"""What each explorer endpoint returns: the `veritrain inspect` views themselves (so the page
shows exactly the figures `inspect --json` prints), plus two listings of plain chain events
that `inspect` has no view for: the registered accounts and the votes on fraud reports."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from protocol.chain import settlement_view as sv
from protocol.chain.client import ChainClient, Vote
from protocol.chain.events import read_events
from protocol.core.errors import ConfigError, VeritrainError


class NotFound(VeritrainError):
    """Raised when an explorer path names no endpoint, no round of the chain or no address."""


def registered(client: ChainClient) -> list[str]:
    """Every registered account, in registration order (`Staking.Registered`)."""
    seen: dict[str, None] = {}
    for row in read_events(client, "staking", "Registered"):
        seen.setdefault(row["account"], None)
    return list(seen)


def nodes(client: ChainClient) -> list[dict[str, Any]]:
    """`inspect node ADDRESS` of every registered miner and validator."""
    return [sv.node(client, account) for account in registered(client)]


def votes(client: ChainClient) -> list[dict[str, Any]]:
    """Every vote cast on a fraud report (`Disputes.FraudVoted`), oldest first; `inspect
    disputes` gives only their count and summed weights."""
    return [{"report_id": int(row["report_id"]), "validator": row["validator"], "vote": _vote_label(int(row["vote"])),
             "weight": int(row["weight"]), "block": row["_block"]}
            for row in read_events(client, "disputes", "FraudVoted")]


def _vote_label(code: int) -> str:
    try:
        return Vote(code).name.lower()
    except ValueError:  # a code newer than this client: shown, not fatal
        return f"vote {code}"


def round_detail(client: ChainClient, arg: str) -> dict[str, Any]:
    """`inspect round N`; a round the chain has not opened is not found."""
    if not arg.isdigit():
        raise NotFound(f"round must be a number, got {arg!r}")
    try:
        return sv.round_detail(client, int(arg))
    except ConfigError as exc:  # the one ConfigError of round_detail: no such round yet
        raise NotFound(str(exc)) from None


def node(client: ChainClient, arg: str) -> dict[str, Any]:
    """`inspect node ADDRESS` (any address: an unregistered one has empty figures)."""
    if not client.w3.is_address(arg):
        raise NotFound(f"not an address: {arg!r}")
    return sv.node(client, arg)


# name -> the view of the whole chain; /api/<name>
LISTS: dict[str, Callable[[ChainClient], Any]] = {
    "summary": sv.summary, "rounds": sv.rounds, "disputes": sv.disputes, "nodes": nodes, "votes": votes,
}
# name -> the view of one round or account; /api/<name>/<argument>
ITEMS: dict[str, Callable[[ChainClient, str], Any]] = {"round": round_detail, "node": node}
