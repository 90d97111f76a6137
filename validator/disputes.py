"""Votes on other validators' reports, and resolution once their window closes.

A voter never takes the reporter's word. For a report on a miner (`replay`, `derivation`,
`unavailable`) it checks σ against the reporter's registered key and the round's seed, checks
that the named segment is one that σ challenged, and re-runs the whole check on that segment
(both of its endpoints, leaf 0 and the derivation), from the miner first and then from any
peer; while something is not served it asks again until shortly before the vote deadline, so a
miner restarting after a crash is not slashed. Any failure confirms; a clean check rejects a
`replay`/`derivation` report and votes `served` on an `unavailable` one. For `lazy_validator` it
runs the audit the report names (validator/audits.py); for `aggregate` it recomputes the tree node
the report names (validator/tree_reports.py). Checkpoints come through
`checks.fetch_leaf`, so every served Merkle proof is checked against the committed trace root.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

from protocol.chain.client import ReportStatus, Vote
from protocol.chain.events import EventLog
from protocol.core.errors import ContractRevert, SignatureError
from protocol.core.proof.challenge import ChallengeError
from protocol.core.proof.commitment import Commit
from protocol.core.proof.witness import NO_WITNESS
from protocol.core.settlement.class_checks import CheckMode, holds_class
from protocol.core.settlement.fraud import FraudKind
from protocol.node.logs import kv
from protocol.node.stage_pipelines import round_pipelines
from validator.audits import Claim, audit_claim, unserved_evidence
from validator.challenges import verified_challenge
from validator.checks import MinerCheck, check_one
from validator.score_audits import audit_score, comparable_loss
from validator.stage_checks import check_stage_one
from validator.tree_aggregation import TreeAggregation
from validator.tree_reports import judge_aggregate

if TYPE_CHECKING:
    from protocol.node.context import NodeContext

SCAN_EVERY_S = 2.0
VOTE_MARGIN_S = 6.0  # a vote goes out this long before the report's deadline at the latest
RETRY_UNSERVED_S = 2.0


class Disputes:
    def __init__(self, ctx: NodeContext, votes: bool = True, tree: TreeAggregation | None = None) -> None:
        self.ctx = ctx
        self.tree = tree  # the validator's aggregation trees: `aggregate` reports are judged on them
        self.votes = votes  # False only for a devnet/test validator that sits settlement out; it still resolves
        self._handled: set[int] = set()
        self._voting: set[int] = set()  # votes in progress or cast
        self._open = 1  # unknown until the first scan completes
        self.report_log = EventLog(ctx.client, "disputes", "FraudReported")

    async def run_forever(self) -> None:
        async with trio.open_nursery() as nursery:  # votes run side by side: one may wait for a deadline
            while True:
                try:
                    await self.scan(nursery)
                except ContractRevert as exc:  # a race with another validator; try again next scan
                    self.ctx.log.info("dispute action skipped %s", kv(reason=exc.reason))
                await trio.sleep(SCAN_EVERY_S)

    async def drain(self, max_wait_s: float) -> None:
        """After the last round: wait while `run_forever` votes and resolves open reports."""
        await trio.sleep(SCAN_EVERY_S)  # let `run_forever` scan at least once more
        with trio.move_on_after(max_wait_s):
            while self._open > 0:
                await trio.sleep(SCAN_EVERY_S)

    async def scan(self, nursery: trio.Nursery) -> None:
        port, client = self.ctx.port, self.ctx.client
        count = await port(port.read.disputes.report_count)
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
            if now >= rep["deadline"] or await self._all_voted(rep):
                if await port.try_send(client.resolve_fraud, rid):
                    self.ctx.log.info("report resolved %s", kv(report=rid))
                continue
            if rid not in self._voting and await self._may_vote(rid, rep):
                self._voting.add(rid)
                nursery.start_soon(self._vote_once, rid, rep)
        self._open = still_open

    async def _all_voted(self, rep: dict) -> bool:
        """Every validator who may vote did (fixed when it was filed: the holders of the
        accused miner's class, or all but the accused validator): the contract resolves it
        then, without waiting out the window."""
        return bool(rep["votes"] >= rep["voter_count"])

    async def _vote_once(self, rid: int, rep: dict) -> None:
        try:
            await self._vote(rid, rep)
        except ContractRevert as exc:  # e.g. the window closed while this node checked
            self.ctx.log.info("vote not cast %s", kv(report=rid, reason=exc.reason))

    async def _may_vote(self, rid: int, rep: dict) -> bool:
        me = self.ctx.address
        if not self.votes:
            return False
        if me in (rep["reporter"], rep["miner"]) or await self.ctx.port(self.ctx.port.read.disputes.vote_of, rid, me) != 0:
            return False
        if rep["class_bound"] and not holds_class(await self.ctx.classes.mask(me), await self.ctx.classes.mask(rep["miner"])):
            return False  # only validators holding the miner's class replay it exactly
        return await self.ctx.port(self.ctx.port.read.rounds.validator_weight, rep["round"], me) > 0

    async def _vote(self, rid: int, rep: dict) -> None:
        ctx = self.ctx
        vote_by = trio.current_time() + max(0.0, rep["deadline"] - await ctx.next_block_time() - VOTE_MARGIN_S)
        seed = bytes((await ctx.port(ctx.client.round_info, rep["round"]))["seed"])
        sig = await self._sig_of(rid)
        if rep["kind"] == FraudKind.LAZY_VALIDATOR:
            vote, found = await self._judge_audit(rep, seed, vote_by)
        elif rep["kind"] == FraudKind.WRONG_SCORE:
            vote, found = await self._judge_score(rep, seed)
        elif rep["kind"] == FraudKind.AGGREGATE:
            vote, found = (None, "holds no aggregation tree") if self.tree is None else await judge_aggregate(self.tree, rep, sig)
        else:
            vote, found = await self._judge_check(rep, seed, sig, vote_by)
        if vote is None:
            ctx.log.info("no vote %s", kv(report=rid, accused=rep["miner"], reason=found))
            return
        await ctx.port(ctx.client.vote_fraud, rid, vote)
        ctx.log.info("voted %s", kv(report=rid, accused=rep["miner"], vote=vote.name.lower(), found=found))

    async def _sig_of(self, rid: int) -> bytes:
        rows = await self.ctx.port(self.report_log.rows)
        return next(bytes(row["challenge_sig"]) for row in rows if row["report_id"] == rid)

    async def _judge_check(self, rep: dict, seed: bytes, sig: bytes, vote_by: float) -> tuple[Vote, str]:
        ctx, r, miner, segment = self.ctx, rep["round"], rep["miner"], rep["segment"]
        commit = (await ctx.commits(r))[miner]
        try:
            challenge = verified_challenge(ctx, rep["reporter"], r, miner, seed, sig, ctx.challenge_compute(commit))
        except (SignatureError, ChallengeError) as exc:
            return Vote.REJECT, f"bad challenge: {exc}"
        if segment not in challenge.segments:
            return Vote.REJECT, f"segment {segment} was not challenged"
        state = await ctx.state_for(r)
        # a report against a miner of a class nobody holds can only be a derivation fault, which is
        # the same on every class: a replay within δ is no evidence either way
        mode = CheckMode.EXACT if rep["class_bound"] else CheckMode.TOLERANCE
        retried = False
        while True:
            check = await self._check_segment(r, miner, commit, seed, state, segment, mode)
            kind = check.outcome.kind
            if kind != FraudKind.UNAVAILABLE or trio.current_time() >= vote_by:
                break
            retried = True
            await trio.sleep(RETRY_UNSERVED_S)  # a miner restarting after a crash gets until the deadline
        if mode is CheckMode.TOLERANCE:
            return (Vote.CONFIRM, str(kind)) if kind is FraudKind.DERIVATION else (Vote.REJECT, "no derivation fault")
        if kind is not None:
            return Vote.CONFIRM, str(kind)
        return unavailable_vote(rep["kind"], retried)

    async def _check_segment(self, r: int, miner: str, commit: Commit, seed: bytes, state: tuple[bytes, bytes],
                             segment: int, mode: CheckMode) -> MinerCheck:
        """The reported segment checked again: a stage miner's as a stage (PROTOCOL.md §16.5)."""
        if self.ctx.setup.spec.stages:
            pipelines = await round_pipelines(self.ctx, r)
            return await check_stage_one(self.ctx, r, miner, commit, seed, state, pipelines, (segment,))
        return await check_one(self.ctx, r, miner, commit, seed, state, (segment,), mode=mode)

    async def _judge_audit(self, rep: dict, seed: bytes, vote_by: float) -> tuple[Vote | None, str]:
        ctx, r = self.ctx, rep["round"]
        reveal = (await ctx.reveals(r)).get(rep["miner"])
        if reveal is None or rep["segment"] >= len(reveal["miners"]):
            return Vote.REJECT, "no such claim"
        i = rep["segment"]
        claim = Claim(r, rep["miner"], reveal["miners"][i], i, reveal["scores"][i], bytes(reveal["witnesses"][i]),
                      bytes(reveal["sigs"][i]), reveal["served"])
        if claim.score == 0 and claim.witness == NO_WITNESS and claim.served:
            return Vote.REJECT, "the validator claimed no check of that miner"
        mode = await ctx.classes.mode(r, claim.miner)
        if mode is CheckMode.TOLERANCE:
            return Vote.REJECT, "a tolerance check has no witness to audit"
        if mode is CheckMode.SKIP:
            return None, "not holding the miner's class: abstains"
        result = await audit_claim(ctx, claim, seed, deadline=vote_by)
        if result.failed:
            return Vote.CONFIRM, result.detail
        # filed while the bundle was not served (a crash, a slow peer): served now and holding, the
        # report is void and the reporter keeps its bond; any other report that fails to hold is rejected
        return (Vote.SERVED if bytes(rep["evidence_hash"]) == unserved_evidence() else Vote.REJECT), result.detail


    async def _judge_score(self, rep: dict, seed: bytes) -> tuple[Vote | None, str]:
        """Recompute the number a `wrong_score` report names: the accused's score of one miner,
        or (index n) its held-out loss (validator/score_audits.py)."""
        ctx, r, accused = self.ctx, rep["round"], rep["miner"]
        reveal = (await ctx.reveals(r)).get(accused)
        if reveal is None or rep["segment"] > len(reveal["miners"]):
            return Vote.REJECT, "no such number"
        if rep["segment"] == len(reveal["miners"]):
            entry = ctx.data.state.recall(r, "scores")
            if entry is None or not await comparable_loss(ctx, accused):
                return None, "not running the accused's class: abstains"
            same = int(reveal["heldout_loss"]) == entry["loss"]
            return (Vote.REJECT, "held-out loss recomputes") if same else (Vote.CONFIRM, "held-out loss differs")
        i = rep["segment"]
        claim = Claim(r, accused, reveal["miners"][i], i, reveal["scores"][i], bytes(reveal["witnesses"][i]),
                      bytes(reveal["sigs"][i]), reveal["served"])
        mode = await ctx.classes.mode(r, claim.miner)
        if not mode.checks:
            return None, "not holding the miner's class: abstains"
        if mode is CheckMode.TOLERANCE:
            return Vote.REJECT, "a tolerance score is not audited"
        result = await audit_score(ctx, claim, seed)
        if result.retry:  # the miner's submission is not to be had: no number to compare
            return None, result.detail
        return (Vote.CONFIRM if result.failed else Vote.REJECT), result.detail


def unavailable_vote(reported: FraudKind, retried: bool) -> tuple[Vote, str]:
    """A voter's vote once the named segment checks: a report of another kind was false; an
    `unavailable` report was false if the checkpoint was served at the first try (reject: its bond
    burns), and the accused late if only a retry got it (served: void, the accused pays
    `late_serve_fee`, the reporter keeps its bond)."""
    if reported != FraudKind.UNAVAILABLE:
        return Vote.REJECT, "check holds"
    return (Vote.SERVED, "served late") if retried else (Vote.REJECT, "served at the first try")
