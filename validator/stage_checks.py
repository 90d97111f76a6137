"""Fetch what one stage miner committed and check it in the worker (docs/PROTOCOL.md §16.5): its
envelope by the committed update hash, bound to it and to the committed trace root, its seat the
one the round's pipelines give it, each challenged segment's bundle from the stage, and the same
segment from its neighbours, which hold its signatures of what it sent them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from protocol.core.errors import ConfigError
from protocol.core.pipeline.attribution import Domain
from protocol.core.pipeline.round_pipelines import seat_of
from protocol.core.pipeline.segment_bundle import max_segment_bytes
from protocol.core.pipeline.stage_envelope import check_stage_binding, decode_stage_envelope
from protocol.core.pipeline.stage_slots import StageSeat
from protocol.core.pipeline.stage_trace import stage_trace_root
from protocol.core.proof.challenge import make_challenge
from protocol.core.proof.commitment import Commit
from protocol.core.proof.envelope import EnvelopeError
from protocol.core.settlement.class_checks import CheckMode
from protocol.core.settlement.fraud import FraudKind
from protocol.node.context import NodeContext
from protocol.node.logs import kv
from protocol.node.stage_pipelines import round_pipelines
from protocol.p2p.errors import P2PError
from validator.checks import MinerCheck, ServedSubmission, fetch_envelope
from validator.stage_work import (
    StageAuditJob,
    StageCheckJob,
    check_stage_miner,
    replay_stage_for_audit,
)
from validator.work import AuditReplay, CheckOutcome


async def fetch_stage_submission(ctx: NodeContext, r: int, miner: str, commit: Commit) -> ServedSubmission:
    """(envelope, None) when the stage miner's envelope is served and is what it committed,
    else (None, what is wrong)."""
    envelope = await fetch_envelope(ctx, commit.update_hash, miner)
    if envelope is None:
        return None, "submission not served"
    try:
        env = decode_stage_envelope(envelope, ctx.caps.update)
        check_stage_binding(env, ctx.client.handle.chain_id, ctx.client.rounds.address, r, miner)
    except EnvelopeError as exc:
        return None, str(exc)
    if bytes(stage_trace_root(env.trace)) != commit.trace_root:
        return None, "stage trace does not hash to the committed root"
    if env.trace.segments * ctx.setup.compute.checkpoint_every != ctx.compute_for(commit).inner_steps:
        return None, f"a stage trace of {env.trace.segments} segments for {commit.steps} committed steps"
    return envelope, None


async def check_stage_one(ctx: NodeContext, r: int, miner: str, commit: Commit, seed_block: bytes,
                          state: tuple[bytes, bytes], pipelines: Sequence[tuple[str, ...]],
                          segments_override: tuple[int, ...] | None = None) -> MinerCheck:
    """Check stage miner `miner` of round r, whose pipelines are `pipelines` (`stage_pipelines`)."""
    cfg = ctx.challenge_compute(commit)
    challenge = make_challenge(ctx.keys.identity, r, bytes.fromhex(miner[2:]), seed_block, cfg)
    segments = challenge.segments if segments_override is None else segments_override

    def verdict(outcome: CheckOutcome, envelope: bytes | None = None) -> MinerCheck:
        ctx.log.info("checked stage %s", kv(round=r, miner=miner, segments=list(segments),
                                            verdict=outcome.kind or "ok", detail=outcome.detail))
        return MinerCheck(miner, commit.column, envelope, outcome, challenge, commit.steps, CheckMode.EXACT)

    envelope, problem = await fetch_stage_submission(ctx, r, miner, commit)
    if envelope is None:
        return verdict(CheckOutcome(miner, FraudKind.UNAVAILABLE, None, None, problem or "", None, None))
    env = decode_stage_envelope(envelope, ctx.caps.update)
    seat = seat_of(pipelines, miner)
    if seat is None or (seat.pipeline, seat.stage) != (env.seat.pipeline, env.seat.stage):
        detail = f"committed as stage {env.seat.stage} of pipeline {env.seat.pipeline}, not its seat {seat}"
        return verdict(CheckOutcome(miner, FraudKind.DERIVATION, None, None, detail, None, None))
    keys = tuple(ctx.node_key_of(m) or b"" for m in seat.members)
    last = env.trace.segments - 1  # its replay's end state must give the committed update
    wanted = (*segments, last) if last not in segments else tuple(segments)
    bundles = await _bundles(ctx, keys[seat.stage], r, commit.trace_root, env.seat, wanted)
    domain = Domain(ctx.client.handle.chain_id, bytes.fromhex(ctx.client.staking.address[2:]))
    neighbours = await _neighbour_bundles(ctx, r, env.seat, seat.members, keys, segments)
    job = StageCheckJob(ctx.setup.spec, ctx.setup.run_seed, miner, seat.members, keys, domain, state[0], state[1],
                        envelope, ctx.caps.update, bundles, tuple(segments), neighbours)
    return verdict(await ctx._work(check_stage_miner, job), envelope)


async def _bundles(ctx: NodeContext, key: bytes, r: int, root: bytes, seat: StageSeat,
                   segments: Sequence[int]) -> dict[int, bytes | None]:
    """The challenged segments' bundles from the stage, in the challenge's order."""
    cap = _segment_cap(ctx, seat)
    return {j: await _bundle(ctx, key, r, root, j, cap) for j in segments}


async def _neighbour_bundles(ctx: NodeContext, r: int, seat: StageSeat, members: Sequence[str], keys: Sequence[bytes],
                             segments: Sequence[int]) -> dict[int, tuple[bytes | None, bytes | None]]:
    """The challenged segments as stage - 1 and stage + 1 served them, from those that committed:
    they hold this stage's signatures of what it sent them (`received_signatures.contradicted_sends`)."""
    commits = await ctx.commits(r)
    sides = []
    for stage in (seat.stage - 1, seat.stage + 1):
        commit = commits.get(members[stage]) if 0 <= stage < seat.stages else None
        sides.append(None if commit is None else (stage, commit.trace_root, replace(seat, stage=stage)))
    out: dict[int, tuple[bytes | None, bytes | None]] = {}
    for j in segments:
        got = [None if side is None else await _bundle(ctx, keys[side[0]], r, side[1], j, _segment_cap(ctx, side[2]))
               for side in sides]
        out[j] = (got[0], got[1])
    return out


def _segment_cap(ctx: NodeContext, seat: StageSeat) -> int:
    split, count, cfg = ctx.setup.stage_split, ctx.setup.spec.microbatches, ctx.setup.compute
    if split is None:
        raise ConfigError("a stage check needs a staged run")
    return max_segment_bytes(ctx.setup.model, split, seat, cfg.checkpoint_every, count, cfg.batch_size // count)


async def stage_audit_replay(ctx: NodeContext, r: int, miner: str, segments: tuple[int, ...]) -> AuditReplay | None:
    """An auditor's replay of a stage miner's `segments` (None: its submission is not to be had)."""
    commit = (await ctx.commits(r)).get(miner)
    if commit is None:
        return None
    envelope, _ = await fetch_stage_submission(ctx, r, miner, commit)
    seat = seat_of(await round_pipelines(ctx, r), miner)
    if envelope is None or seat is None:
        return None
    env = decode_stage_envelope(envelope, ctx.caps.update)
    bundles = await _bundles(ctx, ctx.node_key_of(miner) or b"", r, commit.trace_root, env.seat, segments)
    job = StageAuditJob(ctx.setup.spec, ctx.setup.run_seed, seat.members, envelope, ctx.caps.update, bundles)
    return await ctx._work(replay_stage_for_audit, job)  # type: ignore[no-any-return]


async def _bundle(ctx: NodeContext, key: bytes, r: int, root: bytes, segment: int, cap: int) -> bytes | None:
    """A challenged segment's bundle from the stage, or None when it does not serve it."""
    try:
        return await ctx.p2p.fetch_stage_segment(key, r, root, segment, cap)
    except P2PError as exc:
        ctx.log.info("stage segment unavailable %s", kv(round=r, segment=segment, reason=exc))
        return None
