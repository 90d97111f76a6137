"""What a node tells its operator about rounds that ran without it (it was down, or came back
too late to act): one plain line per round, from chain facts, so a round that paid the node
nothing, or finalized with no reveals at all, never passes silently."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PassedRound:
    round: int
    actions: dict[str, bool]  # this node's duties in the round, in order ("commit", "reveal"): done?
    finalized: bool
    fallback: bool  # ended without a final result: nothing minted, the model unchanged
    reveals: int  # validators that revealed scores in it


def missed(p: PassedRound) -> list[str]:
    """The duties the node did not do, after the last one it did (a reveal needs its commit)."""
    out = []
    for action, done in p.actions.items():
        if not done:
            out.append(f"missed {action}")
            break  # later duties follow from this one: one line, the first thing missed
    return out


def outcome(p: PassedRound) -> str:
    if not p.finalized:
        return "not finalized yet"
    if p.fallback:
        return f"fell back with {p.reveals} reveals (nothing minted, model unchanged)"
    return f"finalized with {p.reveals} reveals"


def describe(p: PassedRound, down: bool = True) -> str | None:
    """`round 7 passed while this node was down: missed commit, finalized with 0 reveals`
    (`down` False, for a round the node was up for: `round 7 passed this node by: ...`);
    None when the node did all its duties and the round settled normally."""
    parts = missed(p)
    if not parts and p.finalized and not p.fallback and p.reveals > 0:
        return None
    how = "passed while this node was down" if down else "passed this node by"
    return f"round {p.round} {how}: " + ", ".join([*parts, outcome(p)])
