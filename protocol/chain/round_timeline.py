"""When each phase of a round closed, for `inspect round N` and the explorer.

The contract's `deadlines` are the latest each phase may run to: the commit deadline stays
start + commit_duration when every miner committed early, and the reveal and audit deadlines
count from the score close plus their full durations. A round whose phases closed early
therefore ended before most of its "deadlines", which read as in the future and out of order
(the commit deadline after the score one). A closed phase is shown at the time it closed:
the commit and score closes the chain records, the last reveal or `audits_done` for the reveal
and audit phases (they close early unrecorded once everyone acted), and the next round's
opening for the end (`end_round` opens it in the same transaction).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from protocol.chain.client import ChainClient, Phase
from protocol.chain.events import read_many

PHASES = ("commit", "score", "reveal", "audit", "result")  # the order they run in; "result" closes as the round ends


def closed_times(phase: Phase, deadlines: Mapping[str, int], commit_closed: int, score_commits: int,
                 reveals: list[int], audits: list[int], ended: int) -> dict[str, int | None]:
    """Each phase's closing time (None while it is open), from the round's `phase`, its
    `deadlines` (keys of PHASES), the recorded commit close, how many validators committed
    scores, and the block times of its reveals, of its `audits_done` and of its end."""
    out: dict[str, int | None] = dict.fromkeys(PHASES)
    if phase >= Phase.SCORING:
        out["commit"] = commit_closed
    if phase >= Phase.REVEAL:
        out["score"] = deadlines["score"]  # the chain's score close: the early one, or the deadline it ran to
    if phase >= Phase.AUDIT:
        out["reveal"] = _closed(deadlines["reveal"], deadlines["score"], reveals, len(reveals) == score_commits)
    if phase >= Phase.RESULT:
        opened = out["reveal"] or deadlines["reveal"]
        out["audit"] = _closed(deadlines["audit"], opened, audits, len(audits) == len(reveals))
    if phase == Phase.ENDED:
        out["result"] = ended
    return out


def _closed(deadline: int, opened: int, acts: list[int], everyone: bool) -> int:
    """A phase that closes once everyone acted closed at the last act (never before it opened);
    otherwise it ran to its deadline."""
    return min(deadline, max([opened, *acts])) if everyone else deadline


def round_closings(client: ChainClient, round_: int, info: dict[str, Any], result_deadline: int) -> dict[str, int | None]:
    """`closed_times` of `round_` read from the chain (`info` is its `round_info`)."""
    phase = Phase(client.phase(round_))
    logs = read_many(client, [("scores", "ScoresCommitted"), ("scores", "ScoresRevealed"), ("scores", "AuditsDone")])
    mine = {event: [row for row in rows if int(row["round"]) == round_] for (_, event), rows in logs.items()}
    deadlines = {"commit": info["commit_deadline"], "score": info["score_deadline"], "reveal": info["reveal_deadline"],
                 "audit": info["audit_deadline"], "result": result_deadline}
    ended = client.round_info(round_ + 1)["start_time"] if phase == Phase.ENDED else 0
    blocks = {row["_block"] for row in (*mine["ScoresRevealed"], *mine["AuditsDone"])}
    at = {b: int(client.w3.eth.get_block(b)["timestamp"]) for b in blocks}  # one read per block, not per event
    return closed_times(phase, deadlines, info["commit_closed_time"], len(mine["ScoresCommitted"]),
                        [at[row["_block"]] for row in mine["ScoresRevealed"]],
                        [at[row["_block"]] for row in mine["AuditsDone"]], ended)
