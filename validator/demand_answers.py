"""Answering demands of the leaves of a pending result this validator agrees with.

A challenger cannot prove a leaf of a tree it has never seen, so anyone may demand one column
leaf, or the root preimage, of a pending attempt (`TreeChallenges.demand_leaf`,
docs/PROTOCOL.md §11.9, Demands); a demand nobody answers before its deadline rejects the
attempt and makes its signers slashable. Every validator whose own result root is the pending
one holds the tree, so it answers each open demand at once with the leaf, its sums and its path
(or the root's body and sums) and takes the demand's bond; the first answer settles the demand,
and a later one reverts harmlessly.
"""

from __future__ import annotations

from protocol.chain.challenge_args import attempt_of, leaf_answer_args
from protocol.chain.client import ChainClient
from protocol.chain.events import EventLog
from protocol.core.errors import ContractRevert
from protocol.core.settlement.result_header import SettledRound
from protocol.node.context import NodeContext
from protocol.node.logs import kv


def open_positions(demands: list[dict], answers: list[dict], roots: list[dict], r: int, attempt: int,
                   n: int) -> list[int]:
    """Positions of attempt `attempt` of round `r` demanded (`LeafDemanded` rows) and not answered
    (`LeafAnswered` rows; `RootAnswered` rows for position n, the root preimage), ascending."""
    def of(rows: list[dict]) -> list[dict]:
        return [row for row in rows if int(row["round"]) == r and int(row["attempt"]) == attempt]

    answered = {int(row["position"]) for row in of(answers)} | ({n} if of(roots) else set())
    return sorted({int(row["position"]) for row in of(demands)} - answered)


def answer_leaf(client: ChainClient, post: dict, own: SettledRound, position: int) -> dict:
    """Send column `position` of `own`'s tree (position n: its root preimage) as the answer to
    its demand in the pending attempt `post` (a `ResultPosted` row); raises ContractRevert when it
    is answered already or late."""
    attempt = attempt_of(post)
    if position == own.inputs.n:
        body, sums = own.tree.root_preimage()
        return client.challenge("tree_challenges", "answer_root", *attempt, (body, list(sums)))
    return client.challenge("tree_challenges", "answer_leaf", *attempt, *leaf_answer_args(own, position))


class DemandAnswers:
    def __init__(self, ctx: NodeContext) -> None:
        self.ctx = ctx
        self.demands = EventLog(ctx.client, "tree_challenges", "LeafDemanded")
        self.answers = EventLog(ctx.client, "tree_challenges", "LeafAnswered")
        self.roots = EventLog(ctx.client, "tree_challenges", "RootAnswered")
        self._tried: set[tuple[int, int, int]] = set()  # (round, attempt, position) this node answered

    async def answer_open(self, post: dict, own: SettledRound) -> None:
        """Answer every demand of the pending attempt `post` (a `ResultPosted` row whose root
        is `own`'s) that nobody answered yet."""
        ctx, r, attempt = self.ctx, int(post["round"]), int(post["attempt"])
        demands, answers = await ctx.port(self.demands.rows), await ctx.port(self.answers.rows)
        roots = await ctx.port(self.roots.rows)
        for position in open_positions(demands, answers, roots, r, attempt, own.inputs.n):
            if (r, attempt, position) in self._tried:
                continue
            self._tried.add((r, attempt, position))
            try:
                await ctx.port(answer_leaf, ctx.client, post, own, position)
                ctx.log.info("leaf demand answered %s", kv(round=r, attempt=attempt, column=position))
            except ContractRevert as exc:  # another validator answered first, or the deadline passed
                ctx.log.info("leaf demand not answered %s", kv(round=r, column=position, reason=exc.reason))

    def logs(self) -> dict[str, EventLog]:
        """The demand events by name, shared with this validator's own disputes (`TreeDispute`)."""
        return {"LeafDemanded": self.demands, "LeafAnswered": self.answers, "RootAnswered": self.roots}

    def forget_before(self, round_: int) -> None:
        self._tried = {k for k in self._tried if k[0] >= round_}
