"""The node's side of `passed_rounds`: which rounds it joined and finished (kept durably in its
state, so a restart knows what ran without it) and the chain facts of a round it missed."""

from __future__ import annotations

from typing import TYPE_CHECKING

from protocol.chain.client import reveals_from
from protocol.node.logs import kv
from protocol.node.passed_rounds import PassedRound, describe

if TYPE_CHECKING:
    from protocol.node.context import NodeContext

ROUND_SEEN_KEY = "rounds:seen"  # NodeState keys: the last round this node joined, and finished
ROUND_DONE_KEY = "rounds:done"


async def passed_round(ctx: NodeContext, round_: int) -> PassedRound:
    finalized = await ctx.port(ctx.port.read.rounds.finalized, round_)
    fallback = finalized and bool(await ctx.port(ctx.client.fallback, round_))
    reveals = len(reveals_from(await ctx.port(ctx.reveal_log.rows), round_))
    return PassedRound(round_, await ctx.duties_in(round_), finalized, fallback, reveals)


async def note_round(ctx: NodeContext, round_: int, down: bool = True) -> None:
    """Warn when `round_` ended without this node's duties done, or with no reveals at all
    (`down`: the node was not running for some of it)."""
    line = describe(await passed_round(ctx, round_), down)
    if line is not None:
        ctx.log.warning("%s %s", line, kv(round=round_))


async def note_passed_rounds(ctx: NodeContext, current: int) -> None:
    """On (re)start: one plain warning for each round since the last one this node finished
    that ran without it, up to `current`, the one it joins now."""
    done = ctx.data.state.get(ROUND_DONE_KEY)
    seen = ctx.data.state.get(ROUND_SEEN_KEY)
    first = done + 1 if done is not None else seen
    if first is None:
        return  # a new data dir: nothing was this node's to miss
    for q in range(first, current):
        await note_round(ctx, q)


async def note_fallen_behind(ctx: NodeContext, joined: int, current: int) -> None:
    """The rounds from `joined` up to `current` ran while this node was still busy with older ones."""
    for q in range(joined, current):
        await note_round(ctx, q)


def round_seen(ctx: NodeContext, round_: int) -> None:
    """Durably: this node took part in `round_` (set when it joins it)."""
    ctx.data.state.set(ROUND_SEEN_KEY, round_)


def round_done(ctx: NodeContext, round_: int) -> None:
    """Durably: this node is through with `round_` (what a restart reports from)."""
    ctx.data.state.set(ROUND_DONE_KEY, round_)
