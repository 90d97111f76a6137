"""The devnet's rounds, extended until every lazy aggregator has been drawn for a tree node.

A lazy aggregator lies only on the nodes it serves, and the draw may pass it over for rounds (at 6
validators and 4 nodes, about (2/3)^4 a round), so a devnet of fixed length may end without it ever
caught. Each lazy aggregator's tree, as soon as it is drawn, says whether it serves a node; in the
last planned round, while one has served none, every node is given one more round, before the
round's result can be final (the tree is drawn for θ_{r+1}, which the result certifies), so no node
has left its loop. At most EXTRA_ROUNDS more, then the run ends and says so.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

EXTRA_ROUNDS = 8  # after 8 more rounds undrawn at 6 validators and 4 nodes: odds about 4e-7


class RoundPlan:
    """How many rounds the devnet runs: `rounds`, or more while a lazy aggregator is undrawn."""

    def __init__(self, rounds: int, members: Sequence[Any], lazy: Sequence[Any], progress: Callable[[str], None]):
        self.rounds, self.limit = rounds, rounds + EXTRA_ROUNDS
        self.members, self.progress = members, progress
        self.undrawn = {m.address.lower(): m for m in lazy}
        self.extended: set[int] = set()
        for m in lazy:
            m.node.tree.tree_for = self._watching(m.node.tree.tree_for)

    def _watching(self, tree_for: Callable[[int], Awaitable[Any]]) -> Callable[[int], Awaitable[Any]]:
        async def watched(r: int) -> Any:
            tree = await tree_for(r)
            self.seen(r, tree)
            return tree
        return watched

    def seen(self, r: int, tree: Any) -> None:
        """Round `r`'s tree (None: summed flat) is drawn: extend the run if a lazy one is undrawn."""
        for address in list(self.undrawn):
            if tree is not None and tree.served_by(address):
                del self.undrawn[address]
        if not self.undrawn or r < self.rounds - 1 or r in self.extended:
            return
        self.extended.add(r)
        if self.rounds >= self.limit:
            self.progress(f"lazy aggregator(s) {', '.join(m.name for m in self.undrawn.values())} not drawn in "
                          f"{self.rounds} rounds: the run ends without catching them")
            return
        self.rounds += 1
        for m in self.members:
            if m.node is not None and m.node.config.max_rounds is not None:
                m.node.config = dataclasses.replace(m.node.config, max_rounds=m.node.config.max_rounds + 1)
        self.progress(f"round {r + 1}: lazy aggregator(s) {', '.join(m.name for m in self.undrawn.values())} "
                      f"not drawn yet: one more round ({self.rounds})")
