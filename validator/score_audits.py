"""Audits of the numbers a validator reveals (docs/PROTOCOL.md §15.4a): its score of a miner, and
its held-out loss, recomputed from chain data.

First, at no cost, a cross-check: honest validators of a class reveal the same bits for a miner
whose checks passed, so a validator compares each positive score it revealed from an exact check
with every other counted, positive score of the same miner, and a difference is a `wrong_score`
report (`cross_check`). A captured committee's lie is then caught whenever one honest validator
holds any of the miner's 2c drawn seats.

Scores are absolute and public functions of the miner's update, θ_r and the round's seed block
(validator/scoring.py `score_seed`), so every validator of the miner's class recomputes a revealed
score bit for bit, alone (a score never depends on which other miners a validator scored). An
auditor recomputes the score of each claim it samples whose number counts (its validator decides
the miner's column and, with committees, holds a drawn seat of it) and is positive; a difference
is a `wrong_score` report that slashes. A zero is what a failed check reveals, and a failed check
is reported: a counted zero without its validator's report on the miner in the round (and with
its report cap not full) is audited too, by checking the miner exactly and recomputing its score;
a check that passes here with a positive score makes the zero a `wrong_score` (a captured
committee cannot zero an honest miner for free). The held-out loss is compared
when auditor and accused run the same single class (the loss is computed in the validator's own
class). A voter on a `wrong_score` report runs the same recomputation (validator/disputes.py).
"""

from __future__ import annotations

from protocol.core.crypto.hashing import blake3_hash
from protocol.core.proof.witness import NO_WITNESS
from protocol.core.settlement.class_checks import CheckMode
from protocol.core.settlement.fraud import FraudKind
from protocol.node.context import NodeContext
from validator.audit_claims import AuditResult, Claim
from validator.checks import check_one, fetch_submission
from validator.scoring import score_seed
from validator.work import ScoreJob, scored_miners


async def recompute_score(ctx: NodeContext, r: int, miner: str, seed_block: bytes) -> int | None:
    """The score any validator of the miner's class reveals for a check that passed; None when
    the miner's submission is not to be had."""
    commit = (await ctx.commits(r)).get(miner)
    if commit is None:
        return None
    envelope, _ = await fetch_submission(ctx, r, miner, commit)
    if envelope is None:
        return None
    state = await ctx.state_for(r)
    job = ScoreJob(ctx.setup.spec, ctx.setup.run_seed, r, state[0], state[1],
                   [(miner, commit.column, envelope, True, commit.steps)], bytes(score_seed(seed_block)),
                   ctx.caps.update)
    return (await ctx._work(scored_miners, job))[miner][0]


async def audit_score(ctx: NodeContext, claim: Claim, seed_block: bytes) -> AuditResult:
    """Whether `claim`'s revealed score is what the miner's update recomputes to."""
    if not await ctx.classes.counts(claim.round, claim.validator, claim.miner, seed_block):
        return AuditResult(False, "its number does not count (no drawn seat)")
    if claim.score == 0 and claim.witness == NO_WITNESS:
        return await audit_zero(ctx, claim, seed_block)
    want = await recompute_score(ctx, claim.round, claim.miner, seed_block)
    if want is None:
        return AuditResult(False, "submission not served: not recomputed", retry=True)
    if want != claim.score:
        return AuditResult(True, f"revealed score {claim.score}, recomputed {want}")
    return AuditResult(False, f"score {want} recomputes")


async def zero_backed(ctx: NodeContext, r: int, validator: str, miner: str) -> bool:
    """Whether a zero `validator` revealed for `miner` comes with its evidence: its own report on
    the miner in round r (filed or joined), or a full report cap (it could file no more)."""
    read = ctx.port.read.disputes
    if await ctx.port(read.report_of, r, miner, validator) != 0:
        return True
    return await ctx.port(read.reports_filed, r, validator) >= await ctx.port(read.max_reports)


async def audit_zero(ctx: NodeContext, claim: Claim, seed_block: bytes) -> AuditResult:
    """Whether a counted zero (a failed check, by what it claims) is wrong: no report of its
    validator backs it, the miner's exact check passes here and its score recomputes above 0."""
    r, miner = claim.round, claim.miner
    if await zero_backed(ctx, r, claim.validator, miner):
        return AuditResult(False, "a zero backed by its validator's report")
    commit = (await ctx.commits(r)).get(miner)
    if commit is None:
        return AuditResult(False, "the miner did not commit")
    check = await check_one(ctx, r, miner, commit, seed_block, await ctx.state_for(r))
    kind = check.outcome.kind
    if kind is FraudKind.UNAVAILABLE:
        return AuditResult(False, "not served here either: not recomputed", retry=True)
    if kind is not None:
        return AuditResult(False, f"the check fails here too ({kind}): the zero holds")
    want = await recompute_score(ctx, r, miner, seed_block)
    if want is None:
        return AuditResult(False, "submission not served: not recomputed", retry=True)
    if want > 0:
        return AuditResult(True, f"revealed 0 with no report, yet the check passes and the score recomputes to {want}")
    return AuditResult(False, "the check passes and the score recomputes to 0")


async def comparable_loss(ctx: NodeContext, validator: str) -> bool:
    """Whether this node's held-out loss and `validator`'s must be equal: both run one and the
    same class."""
    own, theirs = await ctx.classes.mask(ctx.address), await ctx.classes.mask(validator)
    return (own or 1) == (theirs or 1) and (own or 1).bit_count() == 1


def score_evidence(claim: Claim, result: AuditResult) -> bytes:
    """The evidence hash of a `wrong_score` report."""
    return bytes(blake3_hash("score-evidence", claim.score.to_bytes(2, "big"), result.detail.encode()))


def loss_evidence(revealed: int, own: int) -> bytes:
    """The evidence hash of a `wrong_score` report on a held-out loss."""
    return bytes(blake3_hash("loss-evidence", revealed.to_bytes(32, "big"), own.to_bytes(32, "big")))


async def cross_check(ctx: NodeContext, r: int, seed_block: bytes) -> list[tuple[Claim, str]]:
    """The other validators' counted scores that differ from this validator's own positive score
    of the same miner from an exact check (a zero only when no report of its validator backs it):
    one claim per accused (one report per accused and reporter)."""
    entry = ctx.data.state.recall(r, "scores")
    if entry is None:
        return []
    own = {m: s for m, s in zip(entry["miners"], entry["scores"], strict=True) if s > 0}
    modes = await ctx.classes.modes(r, list(own), seed_block)
    exact = {m: s for m, s in own.items() if modes[m] is CheckMode.EXACT}
    out = []
    for v, rev in sorted((await ctx.reveals(r)).items()):
        if v == ctx.address:
            continue
        for i, (m, score) in enumerate(zip(rev["miners"], rev["scores"], strict=True)):
            mine = exact.get(m)
            if not mine or score == mine or not await ctx.classes.counts(r, v, m, seed_block):
                continue
            if score == 0 and await zero_backed(ctx, r, v, m):
                continue
            claim = Claim(r, v, m, i, score, bytes(rev["witnesses"][i]), bytes(rev["sigs"][i]), rev["served"])
            out.append((claim, f"revealed score {score}, this validator's exact check scored {mine}"))
            break
    return out
