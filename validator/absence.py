"""Ends the eligibility of validators absent from settlement (docs/PROTOCOL.md §11.3).

A validator permitted in each of the last `absence_rounds` ended rounds that revealed in none
of them, while others did, is retired through `Disputes.retire_absent`: its stake then stops
counting toward the quorum the others must reach. Every honest validator checks this after
each round it settled; the first transaction wins and the others' estimates revert for free.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from protocol.node.logs import kv

if TYPE_CHECKING:
    from protocol.node.context import NodeContext


async def retire_absent(ctx: NodeContext, ended: int) -> None:
    """Retire each validator absent from rounds `ended - absence_rounds + 1` .. `ended`."""
    n = ctx.client.deployment.run_config.chain.absence_rounds
    if n == 0 or ended + 1 < n or not await ctx.port(ctx.port.read.rounds.finalized, ended):
        return
    window = range(ended - n + 1, ended + 1)
    revealed = {q: {v for v in await ctx.port(ctx.client.validators_of, q)
                    if await ctx.port(ctx.port.read.scores.revealed, q, v)} for q in window}
    if not all(revealed.values()):
        return  # a round nobody revealed in is no one's absence
    witnesses = [min(revealed[q]) for q in reversed(window)]  # newest round first
    candidates = set(await ctx.port(ctx.client.validators_of, ended)) - revealed[ended]
    for v in sorted(candidates):
        if (await _absent_throughout(ctx, v, window, revealed)
                and await ctx.port.try_send(ctx.client.retire_absent, v, witnesses)):
            ctx.log.warning("absent validator retired %s", kv(validator=v, rounds=f"{window.start}-{ended}"))


async def _absent_throughout(ctx: NodeContext, validator: str, window: range, revealed: dict[int, set[str]]) -> bool:
    for q in window:
        if validator in revealed[q] or await ctx.port(ctx.port.read.rounds.validator_weight, q, validator) == 0:
            return False
    return True
