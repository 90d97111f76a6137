"""Proof of replay: audit other validators' replay witnesses (docs/PROTOCOL.md §15).

With its scores a validator reveals, per miner, the challenge signature σ it checked under
and a witness over the states after every inner step of the segment σ picked. In the audit
phase each validator replays a seeded sample of the others' claims. A claim fails when σ is
not the validator's honest challenge, the witness differs from the replay, or the segment
does not replay to what the miner committed while the validator still scored the miner
(it did not check). A failed claim is filed as a `lazy_validator` report, which the
quorum decides by running the same audit (validator/disputes.py).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import trio

from protocol.core.crypto.hashing import blake3_hash
from protocol.core.errors import SignatureError
from protocol.core.proof.auditor_draw import audits
from protocol.core.proof.challenge import ChallengeError
from protocol.core.proof.witness import NO_WITNESS, audit_picks, make_audit_seed, replay_witness
from protocol.core.settlement.class_checks import CheckMode
from protocol.core.settlement.fraud import FraudKind
from protocol.node.context import NodeContext
from protocol.node.logs import kv
from validator.audit_claims import AuditResult, Claim
from validator.challenges import verified_challenge
from validator.checks import MinerCheck, drop_unkept, fetch_leaf, fetch_submission, segment_parts
from validator.score_audits import audit_score
from validator.stage_checks import stage_audit_replay
from validator.work import AuditJob, AuditReplay, replay_for_audit

REPORT_MARGIN_S = 6.0  # an auditor still waiting for a witness reports this long before reporting closes
UNSERVED = "witness bundle not served"


def _evidence(witness: bytes, detail: str) -> bytes:
    return blake3_hash("lazy-evidence", witness, detail.encode())


def lazy_evidence(claim: Claim, result: AuditResult) -> bytes:
    """The evidence hash of a lazy-validator report: what was audited and what was found."""
    return _evidence(claim.witness, result.detail)


def unserved_evidence() -> bytes:
    """The evidence of a report filed because the bundle was never served to the reporter (an
    unserved claim's witness reads as NO_WITNESS): voters that are served a bundle that holds
    vote `served` (void: the bond comes back), not reject."""
    return _evidence(NO_WITNESS, UNSERVED)


def witness_of(ctx: NodeContext, r: int, check: MinerCheck) -> bytes:
    """This validator's own witness for a check that passed (NO_WITNESS otherwise)."""
    o = check.outcome
    if o.kind is not None or not o.inner_hashes or not all(o.inner_hashes):
        return NO_WITNESS
    return replay_witness(bytes.fromhex(ctx.address[2:]), check.challenge.signature, r,
                          bytes.fromhex(check.miner[2:]), check.challenge.segments,
                          [h for hashes in o.inner_hashes for h in hashes])


def claims_of(r: int, reveals: dict[str, dict]) -> dict[str, list[Claim]]:
    """Every revealed claim of a passed check (a non-zero score or a witness), by validator."""
    out: dict[str, list[Claim]] = {}
    for v, rev in reveals.items():
        out[v] = [Claim(r, v, m, i, s, bytes(w), bytes(sig), rev["served"])
                  for i, (m, s, w, sig) in enumerate(zip(rev["miners"], rev["scores"], rev["witnesses"],
                                                         rev["sigs"], strict=True))
                  if s > 0 or bytes(w) != NO_WITNESS]
    return out


def zero_claims_of(r: int, reveals: dict[str, dict]) -> dict[str, list[Claim]]:
    """Every revealed zero without a witness (what a failed or skipped check reveals), by validator."""
    return {v: [Claim(r, v, m, i, 0, bytes(w), bytes(sig), rev["served"])
                for i, (m, s, w, sig) in enumerate(zip(rev["miners"], rev["scores"], rev["witnesses"], rev["sigs"],
                                                       strict=True))
                if s == 0 and bytes(w) == NO_WITNESS]
            for v, rev in reveals.items()}


async def audit_round(ctx: NodeContext, r: int, seed_block: bytes, sample: int,
                      auditors: int = 0) -> list[tuple[Claim, AuditResult, FraudKind]]:
    """Audit this validator's seeded sample of the claims of the validators it is drawn to audit
    (`auditors` expected per validator, `protocol/core/proof/auditor_draw.py`; 0: all): each
    claim's witness, then, when that holds, its score (validator/score_audits.py). Returns the
    failed ones with the kind of report each is."""
    reveals = await ctx.reveals(r)
    claims = claims_of(r, reveals)
    for v, zeros in zero_claims_of(r, reveals).items():  # a counted zero claims a failed check
        claims[v] += [c for c in zeros if await ctx.classes.counts(r, v, c.miner, seed_block)]
    # only exact checks of miners whose class this auditor holds can be replayed bit for bit
    modes = await ctx.classes.modes(r, {c.miner for cs in claims.values() for c in cs})
    claims = {v: [c for c in cs if modes[c.miner] is CheckMode.EXACT] for v, cs in claims.items()}
    by_pair = {(c.validator, c.miner): c for cs in claims.values() for c in cs}
    if sample <= 0:
        return []
    seed = make_audit_seed(ctx.keys.identity, r, seed_block)
    drawn = await drawn_for(ctx, r, seed, list(claims), auditors)
    picks = audit_picks(seed, {v: [c.miner for c in cs] for v, cs in claims.items() if v in drawn}, ctx.address, sample)
    failed = []
    report_by = await _report_by(ctx, r)
    for v, m in picks:
        claim = by_pair[(v, m)]
        result, kind = AuditResult(False, "a zero has no witness"), FraudKind.LAZY_VALIDATOR
        if claim.score or claim.witness != NO_WITNESS:
            result = await audit_claim(ctx, claim, seed_block, deadline=report_by)
        if not result.failed and not ctx.setup.spec.stages:  # a staged score is a pipeline's: not yet audited
            result, kind = await audit_score(ctx, claim, seed_block), FraudKind.WRONG_SCORE
        ctx.log.info("audited %s", kv(round=r, validator=v, miner=m, verdict="failed" if result.failed else "ok",
                                      kind=kind, detail=result.detail))
        if result.failed:
            failed.append((claim, result, kind))
    return failed


async def drawn_for(ctx: NodeContext, r: int, seed: bytes, validators: list[str], auditors: int) -> set[str]:
    """The validators of `validators` this auditor is drawn to audit in round r."""
    everyone = list(await ctx.port(ctx.client.validators_of, r))
    weights = dict(zip(everyone, await ctx.port(ctx.port.read.rounds.weights_of, r, everyone), strict=True))
    total, own = sum(weights.values()), weights.get(ctx.address, 0)
    return {v for v in validators if v != ctx.address
            and audits(seed, v, own, total - weights.get(v, 0), auditors)}


async def _report_by(ctx: NodeContext, r: int) -> float:
    """When, on the trio clock, an auditor stops waiting for unserved witnesses and reports:
    shortly before reporting closes with the audit phase. A validator that crashed after its
    reveal gets until then to come back and serve its bundle."""
    audit_deadline = int((await ctx.port(ctx.client.round_info, r))["audit_deadline"])
    return trio.current_time() + max(0.0, audit_deadline - await ctx.next_block_time() - REPORT_MARGIN_S)


async def audit_claim(ctx: NodeContext, claim: Claim, seed_block: bytes, deadline: float | None) -> AuditResult:
    """Audit one claim; while its witness bundle or checkpoints are not served, ask again
    until `deadline` (trio clock; None: one try)."""
    while True:
        claim = await _with_bundle(ctx, claim)
        result = await _audit_once(ctx, claim, seed_block)
        if not result.retry or deadline is None or trio.current_time() >= deadline:
            return result
        await trio.sleep(max(ctx.config.poll_s, 1.0))


async def _with_bundle(ctx: NodeContext, c: Claim) -> Claim:
    """`c` with its witness and σ, once its validator's bundle is served (fetched again each try)."""
    if c.served:
        return c
    rev = (await ctx.reveals(c.round)).get(c.validator)
    if rev is None or not rev["served"]:
        return c
    return replace(c, witness=bytes(rev["witnesses"][c.index]), sig=bytes(rev["sigs"][c.index]), served=True)


async def _audit_once(ctx: NodeContext, c: Claim, seed_block: bytes) -> AuditResult:
    commit = (await ctx.commits(c.round)).get(c.miner)
    cfg = ctx.challenge_compute(commit) if commit is not None else ctx.setup.compute
    if not c.served:  # its blanks would read as a forged σ: a crashed validator is not a lazy one
        return AuditResult(True, UNSERVED, retry=True)
    if c.score == 0 and c.witness == NO_WITNESS:
        return AuditResult(False, "the validator claimed no check of that miner")
    try:
        segments = verified_challenge(ctx, c.validator, c.round, c.miner, seed_block, c.sig, cfg).segments
    except (SignatureError, ChallengeError) as exc:
        return AuditResult(True, f"challenge signature: {exc}")
    if c.witness == NO_WITNESS:
        return AuditResult(True, "scored without a witness")
    if commit is not None and not ctx.steps_allowed(commit):
        # its committed step count breaks the run's rules: every honest check fails, so a claim
        # that it passed is false (and there is no trace shape to replay it under)
        return AuditResult(True, "the miner's committed step count is not allowed, yet it was scored")
    replay = await _replay(ctx, c, segments)
    if replay is None or not replay.served:
        return AuditResult(True, "replayed checkpoints not served", retry=True)
    if not replay.matches:
        return AuditResult(True, f"segments {list(segments)} do not replay, yet the miner was scored")
    want = replay_witness(bytes.fromhex(c.validator[2:]), c.sig, c.round, bytes.fromhex(c.miner[2:]), segments,
                          replay.inner_hashes)
    if want != c.witness:
        return AuditResult(True, "witness differs from the replay")
    return AuditResult(False, "witness holds")


async def _replay(ctx: NodeContext, c: Claim, segments: tuple[int, ...]) -> AuditReplay | None:
    if ctx.setup.spec.stages:  # a stage miner's segments, from its bundles (PROTOCOL.md §16.5)
        return await stage_audit_replay(ctx, c.round, c.miner, segments)
    commit = (await ctx.commits(c.round)).get(c.miner)
    if commit is None:
        return None
    envelope, _ = await fetch_submission(ctx, c.round, c.miner, commit)
    if envelope is None:
        return None
    # the miner first, then the audited validator (it must serve what it replayed), then anyone
    holders = [k for k in (ctx.node_key_of(c.miner), ctx.node_key_of(c.validator)) if k]
    holders += [k for k in ctx.peers_for(None) if k not in holders]
    fetched = {leaf: await fetch_leaf(ctx, c.round, commit.trace_root, leaf, holders, ctx.challenge_compute(commit),
                                      part)
               for leaf, part in segment_parts(segments).items()}
    leaves: dict[int, bytes | Path | None] = {leaf: None if got is None else got.path for leaf, got in fetched.items()}
    job = AuditJob(ctx.setup.spec, ctx.setup.run_seed, c.round, c.miner, envelope, segments, leaves,
                   ctx.caps.update, commit.steps)
    try:
        return await ctx._work(replay_for_audit, job)
    finally:  # an audit keeps no evidence: what it fetched goes (what was held before stays)
        drop_unkept(ctx, c.round, commit.trace_root, fetched, kept=())
