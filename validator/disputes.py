"""Votes on other validators' fraud reports, and resolution once their window closes.

A voter never takes the reporter's word: it re-runs the check the report names (the
challenged segment's replay, the derivation, or the fetch of the missing checkpoint),
fetching from the miner first and then from any peer (the reporter keeps evidence). The
checkpoints come through `checks.fetch_leaf`, so each served Merkle proof is checked against
the miner's committed trace root; one that fails counts as not served by that peer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

from protocol.chain.client import ReportStatus, Vote
from protocol.core.errors import ContractRevert
from protocol.core.fraud import FraudKind
from protocol.node.logs import kv
from validator.checks import check_one

if TYPE_CHECKING:
    from protocol.node.context import NodeContext

SCAN_EVERY_S = 2.0


class Disputes:
    def __init__(self, ctx: NodeContext) -> None:
        self.ctx = ctx
        self._handled: set[int] = set()
        self._open = 1  # unknown until the first scan completes

    async def run_forever(self) -> None:
        while True:
            try:
                await self.scan()
            except ContractRevert as exc:  # a race with another validator; try again next scan
                self.ctx.log.info("dispute action skipped %s", kv(reason=exc.reason))
            await trio.sleep(SCAN_EVERY_S)

    async def drain(self, max_wait_s: float) -> None:
        """After the last round: wait while `run_forever` votes and resolves open reports."""
        await trio.sleep(SCAN_EVERY_S)  # let `run_forever` scan at least once more
        with trio.move_on_after(max_wait_s):
            while self._open > 0:
                await trio.sleep(SCAN_EVERY_S)

    async def scan(self) -> None:
        port, client = self.ctx.port, self.ctx.client
        count = await port.view("disputes", "report_count")
        now = await self.ctx.next_block_time()
        still_open = 0
        for rid in range(1, count + 1):
            if rid in self._handled:
                continue
            rep = await port(client.report, rid)
            if rep["status"] != ReportStatus.OPEN:
                self._handled.add(rid)
                continue
            still_open += 1
            if now >= rep["deadline"]:
                if await port.try_send(client.resolve_fraud, rid):
                    self.ctx.log.info("report resolved %s", kv(report=rid))
                continue
            if await self._may_vote(rid, rep):
                try:
                    await self._vote(rid, rep)
                except ContractRevert as exc:  # e.g. the window closed while this node checked
                    self.ctx.log.info("vote not cast %s", kv(report=rid, reason=exc.reason))
        self._open = still_open

    async def _may_vote(self, rid: int, rep: dict) -> bool:
        me = self.ctx.address
        if rep["reporter"] == me or await self.ctx.port.view("disputes", "vote_of", rid, me):
            return False
        return bool(await self.ctx.port.view("rounds", "validator_weight", rep["round"], me))

    async def _vote(self, rid: int, rep: dict) -> None:
        ctx, r, miner = self.ctx, rep["round"], rep["miner"]
        commit = (await ctx.commits(r))[miner]
        seed = (await ctx.port(ctx.client.round_info, r))["seed"]
        n_segments = ctx.setup.compute.n_segments
        segment = rep["segment"]
        segments = (segment,) if rep["kind"] == FraudKind.REPLAY and segment < n_segments else ()
        if rep["kind"] == FraudKind.UNAVAILABLE and 0 < segment <= n_segments:  # the missing leaf ends segment-1
            segments = (segment - 1,)
        check = await check_one(ctx, r, miner, commit, bytes(seed), await ctx.state_for(r), segments)
        if check.outcome.kind is not None:
            vote = Vote.CONFIRM
        elif rep["kind"] == FraudKind.UNAVAILABLE:
            vote = Vote.SERVED
        else:
            vote = Vote.REJECT
        await ctx.port(ctx.client.vote_fraud, rid, vote)
        ctx.log.info("voted %s", kv(report=rid, miner=miner, vote=vote.name.lower(), found=check.outcome.kind))
