"""Answering demands of the parts of a pending result this validator agrees with.

A challenger cannot prove a value of a result it has never seen, so anyone may demand one part
of a pending attempt: a column leaf, the root preimage, the validator entries, the claims chunk
summaries or a claims chunk (`TreeChallenges.demand`, docs/PROTOCOL.md §11.9, Demands); a demand nobody answers before its
deadline rejects the attempt and makes its signers slashable. Every validator whose own result
root is the pending one holds every part, so it answers each open demand at once (the leaf with
its sums and path, the root's body and sums, the entries, a chunk) and takes the demand's bond; the
first answer settles the demand, and a later one reverts harmlessly.
"""

from __future__ import annotations

from collections.abc import Mapping

from protocol.chain.challenge_args import (
    answered_entries_arg,
    attempt_of,
    claims_arg,
    claims_chunk_arg,
    leaf_answer_args,
)
from protocol.chain.client import ChainClient
from protocol.chain.events import EventLog
from protocol.core.errors import ContractRevert
from protocol.core.settlement.result_header import SettledRound
from protocol.node.context import NodeContext
from protocol.node.logs import kv
from validator.posted_parts import EVENTS, PostedParts


def open_positions(logs: Mapping[str, EventLog], r: int, attempt: int, n: int) -> list[int]:
    """Positions of attempt `attempt` of round `r` demanded and not answered, ascending: columns,
    n (the root preimage), n + 1 (the validator entries), n + 2 (the claims chunk summaries), n + 3 + c
    (claims chunk c)."""
    demanded = {int(row["position"]) for row in logs["Demanded"].rows()
                if (int(row["round"]), int(row["attempt"])) == (r, attempt)}
    return sorted(demanded - PostedParts.of_logs(logs, r, attempt).answered(n))


def answer_part(client: ChainClient, post: dict, own: SettledRound, position: int) -> dict:
    """Send part `position` of `own` (a column, n its root preimage, n + 1 its validator entries,
    n + 2 its claims chunk summaries, n + 3 + c its claims chunk c) as the answer to its demand in
    the pending attempt `post` (a
    `ResultPosted` row); raises ContractRevert when it is answered already or late."""
    attempt, n = attempt_of(post), own.inputs.n
    if position == n:
        body, sums = own.tree.root_preimage()
        return client.challenge("tree_challenges", "answer_root", *attempt, (body, list(sums)))
    if position == n + 1:
        return client.challenge("tree_challenges", "answer_validators", *attempt, answered_entries_arg(own))
    if position == n + 2:
        return client.challenge("tree_challenges", "answer_claims", *attempt, claims_arg(own))
    if position > n + 2:
        return client.challenge("tree_challenges", "answer_claims_chunk", *attempt, *claims_chunk_arg(own, position - n - 3))
    return client.challenge("tree_challenges", "answer_leaf", *attempt, *leaf_answer_args(own, position))


class DemandAnswers:
    def __init__(self, ctx: NodeContext) -> None:
        self.ctx = ctx
        self.events = {name: EventLog(ctx.client, "tree_challenges", name) for name in EVENTS}
        self._tried: set[tuple[int, int, int]] = set()  # (round, attempt, position) this node answered

    async def answer_open(self, post: dict, own: SettledRound) -> None:
        """Answer every demand of the pending attempt `post` (a `ResultPosted` row whose root
        is `own`'s) that nobody answered yet."""
        ctx, r, attempt = self.ctx, int(post["round"]), int(post["attempt"])
        for position in await ctx.port(open_positions, self.events, r, attempt, own.inputs.n):
            if (r, attempt, position) in self._tried:
                continue
            self._tried.add((r, attempt, position))
            try:
                await ctx.port(answer_part, ctx.client, post, own, position)
                ctx.log.info("demand answered %s", kv(round=r, attempt=attempt, position=position))
            except ContractRevert as exc:  # another validator answered first, or the deadline passed
                ctx.log.info("demand not answered %s", kv(round=r, position=position, reason=exc.reason))

    def leave_to_others(self, r: int, attempt: int, position: int) -> None:
        """Never answer this demand (this node's own probe: someone else must)."""
        self._tried.add((r, attempt, position))

    def logs(self) -> dict[str, EventLog]:
        """The demand events by name, shared with this validator's own disputes (`ResultDispute`)."""
        return self.events

    def forget_before(self, round_: int) -> None:
        self._tried = {k for k in self._tried if k[0] >= round_}
