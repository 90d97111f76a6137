"""Fetch what one miner committed and check it in the worker (the validator's I/O shell)."""

from __future__ import annotations

import time
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

import trio

from protocol.core.checkpoint.part_bytes import CheckpointPart, merge_parts
from protocol.core.model.gpt import ModelConfig
from protocol.core.proof.challenge import Challenge, make_challenge
from protocol.core.proof.commitment import Commit
from protocol.core.proof.envelope import EnvelopeError, check_binding, decode_envelope
from protocol.core.proof.trace import ProofMismatch, check_served_leaf, trace_root
from protocol.core.settlement.class_checks import CheckMode
from protocol.core.settlement.fraud import FraudKind
from protocol.core.train.compute_config import ComputeConfig, StepCountError
from protocol.core.wire.blob_caps import BlobKind
from protocol.node.checkpoint_part_files import holds_part
from protocol.node.context import NodeContext
from protocol.node.logs import kv
from protocol.p2p.blob_client import StoredCheckpoint
from protocol.p2p.errors import P2PError
from validator.work import CheckJob, CheckOutcome, check_miner


@dataclass(frozen=True)
class MinerCheck:
    miner: str
    order: int
    envelope: bytes | None  # None: not served, or not what was committed
    outcome: CheckOutcome
    challenge: Challenge
    steps: int = 0  # the miner's committed inner steps (0: the run's H)
    mode: CheckMode = CheckMode.EXACT  # how this validator checked it (hardware classes)


def needed_leaves(segments: tuple[int, ...], n_leaves: int,
                  mode: CheckMode = CheckMode.EXACT) -> dict[int, CheckpointPart]:
    """Each leaf a check reads, with the part it reads (docs/PROTOCOL.md §7): leaf 0's `ef` and
    the last leaf's parameters (derivation), and both ends of each challenged segment."""
    wanted: dict[int, list[CheckpointPart]] = {0: [CheckpointPart.EF], n_leaves - 1: [CheckpointPart.PARAMS]}
    for leaf, part in segment_parts(segments, mode).items():
        wanted.setdefault(leaf, []).append(part)
    return {leaf: merge_parts(parts) for leaf, parts in sorted(wanted.items())}


def segment_parts(segments: tuple[int, ...], mode: CheckMode = CheckMode.EXACT) -> dict[int, CheckpointPart]:
    """What replaying `segments` reads: each start whole; each end as its digest list (exact
    mode: the replay's hash decides) or whole (tolerance: parameters and both moments are
    measured against δ)."""
    end = CheckpointPart.ALL if mode is CheckMode.TOLERANCE else CheckpointPart.HASHES
    wanted: dict[int, list[CheckpointPart]] = {}
    for s in segments:
        wanted.setdefault(s, []).append(CheckpointPart.ALL)
        wanted.setdefault(s + 1, []).append(end)
    return {leaf: merge_parts(parts) for leaf, parts in sorted(wanted.items())}


@dataclass(frozen=True)
class FetchedLeaf:
    """A served checkpoint whose proof checked, as a file in the data dir indexed by (round,
    trace root, leaf): served to voters and auditors even if the miner stops serving it."""

    path: Path
    proof: bytes
    fresh: bool  # indexed by this fetch (the fetcher drops it unless kept), not held before


async def fetch_leaf(ctx: NodeContext, r: int, root: bytes, leaf: int, holders: list[bytes],
                     cfg: ComputeConfig | None = None,
                     part: CheckpointPart = CheckpointPart.ALL) -> FetchedLeaf | None:
    """`part` of a checkpoint (checkpoint_parts.py) from the first holder that serves it with a
    Merkle proof leading from its checkpoint hash at `leaf` to the committed trace root `root`
    (docs/INTEROP.md §6) of a trace of `cfg`'s shape (the miner's committed steps; default the
    run's H). A holder whose proof does not verify, or that serves less than `part`, did not
    serve it: the next one is asked. None if nobody did. It streams into the data dir, so the
    node never holds it whole; one indexed already (evidence kept earlier, or this node's own)
    that holds `part` is used as it is."""
    cfg = cfg if cfg is not None else ctx.setup.compute
    held = ctx.data.held_checkpoint(r, root, leaf)
    if held is not None and await trio.to_thread.run_sync(holds_part, held[0], part):
        return FetchedLeaf(held[0], held[1], fresh=False)
    for key in holders:
        got = await _fetch_from(ctx, key, r, root, leaf, part)
        if got is None:
            continue
        try:
            await trio.to_thread.run_sync(_check_file, got, root, leaf, ctx.setup.model, cfg, part)
        except ProofMismatch as exc:
            got.path.unlink(missing_ok=True)
            ctx.log.info("checkpoint rejected %s", kv(round=r, leaf=leaf, part=part.value, peer=key.hex()[:12],
                                                      reason=exc))
            continue
        path, fresh = await trio.to_thread.run_sync(ctx.data.keep_fetched, r, root, leaf, got.path, got.blob_hash,
                                                    got.proof, part)
        return FetchedLeaf(path, got.proof, fresh)
    return None


def _check_file(got: StoredCheckpoint, root: bytes, leaf: int, model: ModelConfig, cfg: ComputeConfig,
                part: CheckpointPart) -> None:
    check_served_leaf(got.path.read_bytes(), got.proof, root, leaf, model, cfg, part)  # decoded once, then dropped


async def _fetch_from(ctx: NodeContext, key: bytes, r: int, root: bytes, leaf: int,
                      part: CheckpointPart) -> StoredCheckpoint | None:
    with trio.move_on_after(ctx.config.fetch_timeout_s):
        try:
            return await ctx.p2p.fetch_checkpoint_into(key, r, root, leaf, ctx.data.checkpoint_sink(),
                                                       ctx.caps.checkpoint, part.value)
        except P2PError:
            return None
    return None


def drop_unkept(ctx: NodeContext, r: int, root: bytes, fetched: dict[int, FetchedLeaf | None],
                kept: Collection[int]) -> None:
    """Drop the leaves this fetch indexed that are not kept as evidence (`kept_leaves`); those
    held before it stay (dropped once the round is final: `prune_checkpoints`)."""
    for leaf, got in fetched.items():
        if got is not None and got.fresh and leaf not in kept:
            ctx.data.drop_checkpoint(r, root, leaf)


def kept_leaves(fetched: dict[int, FetchedLeaf | None], segments: tuple[int, ...],
                failed: bool) -> dict[int, FetchedLeaf | None]:
    """All of a failed check (the report's evidence); of a passed one, the ends of the replayed
    segments, which auditors of its witness must be able to get (docs/PROTOCOL.md §15.3)."""
    if failed:
        return fetched
    ends = {leaf for s in segments for leaf in (s, s + 1)}
    return {leaf: got for leaf, got in fetched.items() if leaf in ends}


async def carry_in_hash_of(ctx: NodeContext, r: int, miner: str) -> bytes | None:
    """The carry hash the miner committed to carry out of round r-1 (None: it missed it)."""
    if r == 0:
        return None
    prev = (await ctx.commits(r - 1)).get(miner)
    if prev is None:
        return None
    blob = await ctx.fetch_blob(prev[0], BlobKind.UPDATE, first=miner)
    if blob is None:
        return None
    return bytes(decode_envelope(blob, ctx.caps.update).trace.carry_hash)


EMBARGO_GRACE_S = 10.0  # how long a submission not (yet) served is asked for again
PREFETCH = 3  # miners fetched ahead of the one being checked (each holds its checkpoints on disk)


ServedSubmission = tuple[bytes | None, str | None]  # (envelope, None) or (None, what is wrong)


async def fetch_submissions(ctx: NodeContext, r: int,
                            commits: dict[str, Commit]) -> dict[str, ServedSubmission]:
    """The submissions (update and trace: small) of `commits`' miners, fetched concurrently and
    once, for both the checks and the usefulness scores."""
    got: dict[str, ServedSubmission] = {}

    async def one(miner: str, commit: Commit) -> None:
        got[miner] = await fetch_submission(ctx, r, miner, commit)

    async with trio.open_nursery() as nursery:
        for miner, commit in commits.items():
            nursery.start_soon(one, miner, commit)
    return got


async def check_all(ctx: NodeContext, r: int, commits: dict[str, Commit], seed_block: bytes,
                    state: tuple[bytes, bytes], submissions: dict[str, ServedSubmission],
                    modes: dict[str, CheckMode] | None = None) -> list[MinerCheck]:
    """Check every miner as `modes` says (default: exact): checkpoints are fetched concurrently
    while the worker checks the miners whose checkpoints are here, one at a time. A miner of a
    class others decide is not checked. Results come back in miner order."""
    limiter = trio.CapacityLimiter(PREFETCH)
    done: dict[str, MinerCheck] = {}
    modes = modes or {}

    async def one(miner: str, commit: Commit) -> None:
        mode = modes.get(miner, CheckMode.EXACT)
        if not mode.checks:
            done[miner] = not_checked(ctx, r, miner, commit, seed_block, mode)
            return
        async with limiter:  # held until checked: bounds the checkpoints held on disk
            done[miner] = await check_one(ctx, r, miner, commit, seed_block, state, submission=submissions[miner],
                                          mode=mode)

    async with trio.open_nursery() as nursery:
        for miner, commit in sorted(commits.items()):
            nursery.start_soon(one, miner, commit)
    for check in done.values():
        if check.mode.checks:
            ctx.metrics.check_done(passed=check.outcome.kind is None)
    return [done[m] for m in sorted(done)]


async def fetch_submission(ctx: NodeContext, r: int, miner: str, commit: Commit) -> ServedSubmission:
    """(envelope, None) when the miner's submission is served and is what it committed,
    else (None, what is wrong)."""
    update_hash, root = commit.update_hash, commit.trace_root
    envelope = await fetch_envelope(ctx, update_hash, miner)
    if envelope is None:
        return None, "submission not served"
    try:
        env = decode_envelope(envelope, ctx.caps.update)
        check_binding(env, ctx.client.handle.chain_id, ctx.client.rounds.address, r, miner)
    except EnvelopeError as exc:
        return None, str(exc)
    if trace_root(env.trace) != root:
        return None, "trace does not hash to the committed root"
    return envelope, None


async def fetch_envelope(ctx: NodeContext, update_hash: bytes, miner: str) -> bytes | None:
    """The envelope, asked for again for up to EMBARGO_GRACE_S: a miner serves nothing of a
    round before it sees the commit phase close (docs/PROTOCOL.md §9), which may be a poll
    (or a retried chain read) after this validator did."""
    deadline = trio.current_time() + EMBARGO_GRACE_S
    while True:
        envelope = await ctx.fetch_blob(update_hash, BlobKind.UPDATE, first=miner)
        if envelope is not None or trio.current_time() >= deadline:
            return envelope
        await trio.sleep(ctx.config.poll_s)


NOT_CHECKED = {CheckMode.SKIP: "not checked: its class is decided by the validators holding it",
               CheckMode.OFF_COMMITTEE: "not checked: its committee decides it"}


def not_checked(ctx: NodeContext, r: int, miner: str, commit: Commit, seed_block: bytes,
                mode: CheckMode = CheckMode.SKIP) -> MinerCheck:
    """A miner others decide (its class's holders, or its committee): no replay, no witness, score 0."""
    challenge = make_challenge(ctx.keys.identity, r, bytes.fromhex(miner[2:]), seed_block, ctx.challenge_compute(commit))
    outcome = CheckOutcome(miner, None, None, None, NOT_CHECKED[mode], None, None)
    return MinerCheck(miner, commit.column, None, outcome, challenge, commit.steps, mode)


async def check_one(ctx: NodeContext, r: int, miner: str, commit: Commit, seed_block: bytes,
                    state: tuple[bytes, bytes], segments_override: tuple[int, ...] | None = None,
                    submission: ServedSubmission | None = None, mode: CheckMode = CheckMode.EXACT) -> MinerCheck:
    """`submission`: what `fetch_submission` returned, when it ran already; `mode`: exact, or
    tolerance for a class no validator holds with enough stake."""
    root, order = commit.trace_root, commit.column
    cfg = ctx.challenge_compute(commit)
    challenge = make_challenge(ctx.keys.identity, r, bytes.fromhex(miner[2:]), seed_block, cfg)
    try:
        ctx.compute_for(commit)
    except StepCountError as exc:  # the commitment itself breaks the run's rules: nothing to replay
        outcome = CheckOutcome(miner, FraudKind.DERIVATION, None, None, f"committed step count: {exc}", None, None)
        return MinerCheck(miner, order, None, outcome, challenge, commit.steps, mode)
    segments = challenge.segments if segments_override is None else segments_override
    envelope, problem = submission if submission is not None else await fetch_submission(ctx, r, miner, commit)
    if envelope is None:
        ctx.log.info("submission rejected %s", kv(round=r, miner=miner, reason=problem))
        outcome = CheckOutcome(miner, FraudKind.UNAVAILABLE, None, None, problem or "", None, None)
        return MinerCheck(miner, order, None, outcome, challenge, commit.steps, mode)
    holders = ctx.peers_for(miner)  # the miner once, first; then everyone else (voters keep evidence)
    n_leaves = cfg.n_segments + 1
    started = time.monotonic()
    fetched = {leaf: await fetch_leaf(ctx, r, root, leaf, holders, cfg, part)
               for leaf, part in needed_leaves(segments, n_leaves, mode).items()}
    leaves: dict[int, bytes | Path | None] = {leaf: None if got is None else got.path for leaf, got in fetched.items()}
    job = CheckJob(ctx.setup.spec, ctx.setup.run_seed, r, miner, state[0], state[1], envelope, root,
                   await carry_in_hash_of(ctx, r, miner), leaves, segments, ctx.caps.update, commit.steps,
                   mode.value)
    fetch_done = time.monotonic()
    try:
        outcome = await ctx._work(check_miner, job)
    except BaseException:
        drop_unkept(ctx, r, root, fetched, kept=())  # nothing judged: nothing to keep as evidence
        raise
    ctx.metrics.observe_replay(time.monotonic() - fetch_done)
    kept = kept_leaves(fetched, segments, failed=outcome.kind is not None)
    await trio.to_thread.run_sync(drop_unkept, ctx, r, root, fetched, kept)
    ctx.log.info("checked %s", kv(round=r, miner=miner, mode=mode.value, segments=list(segments),
                                  verdict=outcome.kind or ("tolerated" if outcome.tolerated else "ok"),
                                  fetch_s=f"{fetch_done - started:.2f}", check_s=f"{time.monotonic() - fetch_done:.2f}"))
    return MinerCheck(miner, order, envelope, outcome, challenge, commit.steps, mode)
