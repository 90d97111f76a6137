"""Fetch what one miner committed and check it in the worker (the validator's I/O shell)."""

from __future__ import annotations

import time
from dataclasses import dataclass

import trio

from protocol.envelope import EnvelopeError, check_binding, decode_envelope
from protocol.node_base import NodeContext
from protocol.p2p.errors import P2PError
from protocol.proof import Challenge, make_challenge, trace_root
from protocol.runtime import kv
from validator.work import CheckJob, CheckOutcome, check_miner


@dataclass(frozen=True)
class MinerCheck:
    miner: str
    order: int
    envelope: bytes | None  # None: not served, or not what was committed
    outcome: CheckOutcome
    challenge: Challenge


def needed_leaves(segments: tuple[int, ...], n_leaves: int) -> list[int]:
    """Leaf 0 and the last leaf (derivation), plus both ends of each challenged segment."""
    return sorted({0, n_leaves - 1, *[s for s in segments], *[s + 1 for s in segments]})


async def fetch_leaf(ctx: NodeContext, r: int, root: bytes, leaf: int, holders: list[bytes]) -> bytes | None:
    """A checkpoint from the first holder that serves it (kept as evidence if it arrives)."""
    for key in holders:
        with trio.move_on_after(ctx.config.fetch_timeout_s):
            try:
                got = await ctx.p2p.fetch_checkpoint(key, r, root, leaf)
            except P2PError:
                continue
            ctx.data.add_checkpoint(r, root, leaf, got.data, got.proof)
            return got.data
    return None


async def ef_hash_of(ctx: NodeContext, r: int, miner: str) -> bytes | None:
    """The residual hash the miner committed to carry out of round r-1 (None: it missed it)."""
    if r == 0:
        return None
    prev = (await ctx.commits(r - 1)).get(miner)
    if prev is None:
        return None
    blob = await ctx.fetch_blob(prev[0], first=miner)
    if blob is None:
        return None
    return bytes(decode_envelope(blob, ctx.config.max_blob_bytes).trace.residual_hash)


async def check_one(ctx: NodeContext, r: int, miner: str, commit: tuple[bytes, bytes, int], seed_block: bytes,
                    state: tuple[bytes, bytes], segments_override: tuple[int, ...] | None = None) -> MinerCheck:
    update_hash, root, order = commit
    cfg = ctx.setup.compute
    challenge = make_challenge(ctx.keys.identity, r, bytes.fromhex(miner[2:]), seed_block, cfg)
    segments = challenge.segments if segments_override is None else segments_override
    envelope = await ctx.fetch_blob(update_hash, first=miner)
    problem = None
    if envelope is None:
        problem = "submission not served"
    else:
        try:
            env = decode_envelope(envelope, ctx.config.max_blob_bytes)
            check_binding(env, ctx.client.handle.chain_id, ctx.client.settlement.address, r, miner)
            if trace_root(env.trace) != root:
                problem = "trace does not hash to the committed root"
        except EnvelopeError as exc:
            problem = str(exc)
    if problem is not None:
        ctx.log.info("submission rejected %s", kv(round=r, miner=miner, reason=problem))
        outcome = CheckOutcome(miner, "unavailable", None, None, problem, None, None)
        return MinerCheck(miner, order, None, outcome, challenge)
    assert envelope is not None
    holders = [k for k in [ctx.node_key_of(miner)] if k] + ctx.peers_for(None)
    n_leaves = cfg.n_segments + 1
    started = time.monotonic()
    leaves = {leaf: await fetch_leaf(ctx, r, root, leaf, holders) for leaf in needed_leaves(segments, n_leaves)}
    job = CheckJob(ctx.setup.spec, ctx.setup.run_seed, r, miner, state[0], state[1], envelope, root,
                   await ef_hash_of(ctx, r, miner), leaves, segments, ctx.config.max_blob_bytes)
    fetched = time.monotonic()
    outcome = await ctx._work(check_miner, job)
    ctx.log.info("checked %s", kv(round=r, miner=miner, segments=list(segments), verdict=outcome.kind or "ok",
                                  fetch_s=f"{fetched - started:.2f}", check_s=f"{time.monotonic() - fetched:.2f}"))
    return MinerCheck(miner, order, envelope, outcome, challenge)
