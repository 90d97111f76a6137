"""Collecting the bonds of a round's demands once its result is settled (docs/PROTOCOL.md §11.9).

A demand's bond is held until the attempt it concerns is settled: it pays whoever answered an
attempt that became final (the signers had shown their part, the demand was spam or caution),
and goes back to the demander of an attempt that was rejected, whatever the reason (answering
the parts of a wrong result earns nothing, so an honest disputer pays nothing for its search),
or that nobody answered. `TreeChallenges.settle_demand` pays by that rule; anyone may call it. A
validator calls it, when a round has ended, for every demand of the round whose bond is its own.
"""

from __future__ import annotations

from collections.abc import Mapping

from protocol.chain.events import EventLog
from validator.posted_parts import PostedParts


def payee(demander: str, answerer: str | None, rejected: bool) -> str:
    """Who a demand's bond pays: the answerer of an attempt made final, else the demander."""
    return demander if rejected or answerer is None else answerer


def bonds_of(logs: Mapping[str, EventLog], account: str, r: int, n: int, rejected_count: int,
             final: bool) -> list[tuple[int, int]]:
    """(attempt, position) of round `r`'s demands whose bonds pay `account`, once the round
    ended (`rejected_count` attempts rejected, the next one final if `final`)."""
    out, parts = [], {}
    for d in logs["Demanded"].rows():
        if int(d["round"]) != r:
            continue
        attempt, position = int(d["attempt"]), int(d["position"])
        rejected = attempt <= rejected_count
        if not rejected and not final:
            continue  # not settled: the round has not ended
        if attempt not in parts:
            parts[attempt] = PostedParts.of_logs(logs, r, attempt)
        answerer = parts[attempt].answerer_of(position, n)
        if payee(str(d["demander"]), answerer, rejected).lower() == account.lower():
            out.append((attempt, position))
    return out
