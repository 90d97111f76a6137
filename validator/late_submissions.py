"""Ask again, for a while, for submissions a miner did not serve within the embargo grace.

A miner restarted mid-round (Ctrl-C, a crash, a reboot) serves its journaled work again once
it is back up, which takes longer than the grace (its worker imports torch first). Scoring it
0 then pays nothing for honest, verifiable work, so the validator keeps asking while the score
phase leaves time to check and commit: up to `LATE_SHARE` of the phase, never beyond. The
same goes for a miner that went down while its checkpoints were being fetched (`recheck_unavailable`)."""

from __future__ import annotations

import trio

from protocol.core.proof.commitment import Commit
from protocol.core.settlement.fraud import FraudKind
from protocol.node.context import NodeContext
from protocol.node.logs import kv
from protocol.p2p.errors import P2PError
from validator.checks import MinerCheck, ServedSubmission, check_one, fetch_submissions

NOT_SERVED = "submission not served"  # fetch_submission's reason when no peer served the envelope
LATE_SHARE = 0.5  # of the score phase (from the commit close) spent waiting for unserved submissions
RECHECK_EVERY_S = 2.0  # between asks to a miner that went down mid-check
PROBE_TIMEOUT_S = 5.0  # for a miner to serve its own update (is it up?)


def unserved(submissions: dict[str, ServedSubmission]) -> list[str]:
    """Miners whose submission nobody served (not ones that served something wrong)."""
    return sorted(m for m, (envelope, problem) in submissions.items() if envelope is None and problem == NOT_SERVED)


def wait_until(commit_closed_time: int, score_deadline: int, share: float = LATE_SHARE) -> float:
    """The chain time up to which unserved submissions are asked for again."""
    return commit_closed_time + max(0, score_deadline - commit_closed_time) * share


async def fetch_late(ctx: NodeContext, r: int, commits: dict[str, Commit],
                     submissions: dict[str, ServedSubmission]) -> dict[str, ServedSubmission]:
    """`submissions` with the unserved ones asked for again until `wait_until`."""
    missing = unserved(submissions)
    if not missing:
        return submissions
    info = await ctx.port(ctx.client.round_info, r)
    until = wait_until(int(info["commit_closed_time"]), int(info["score_deadline"]))
    ctx.log.info("waiting for unserved submissions %s", kv(round=r, miners=",".join(missing),
                                                           wait_s=f"{until - await ctx.next_block_time():.0f}"))
    out = dict(submissions)
    while missing and await ctx.next_block_time() < until:
        got = await fetch_submissions(ctx, r, {m: commits[m] for m in missing})  # each asks for the grace
        for m, served in got.items():
            if served[0] is not None or served[1] != NOT_SERVED:
                out[m] = served
                ctx.log.info("late submission served %s", kv(round=r, miner=m))
        missing = unserved({m: out[m] for m in missing})
    return out


async def miner_up(ctx: NodeContext, miner: str, commit: Commit) -> bool:
    """Whether the miner itself serves its update now: one that does while its checkpoints were
    not served is withholding them (the report stands); one that does not is down."""
    key = ctx.node_key_of(miner)
    if key is None:
        return False
    with trio.move_on_after(PROBE_TIMEOUT_S):
        try:
            await ctx.p2p.fetch_blob(key, commit.update_hash, None, ctx.caps.update)
            return True
        except P2PError:
            return False
    return False


async def recheck_unavailable(ctx: NodeContext, r: int, commits: dict[str, Commit], seed_block: bytes,
                              state: tuple[bytes, bytes], found: list[MinerCheck]) -> list[MinerCheck]:
    """`found` with the checks that failed as unavailable because the miner went down (killed
    while its checkpoints were being fetched) run again once it is back, until `wait_until`: an
    honest miner restarted by then is checked and scored, not reported. A miner already up again
    when asked is checked once more at once (it may have come back while the others were being
    checked); if it still refuses, its verdict stands and it is not asked again."""
    failed = [c.miner for c in found if c.outcome.kind is FraudKind.UNAVAILABLE and c.mode.checks]
    if not failed:
        return found
    by_miner = {c.miner: c for c in found}
    late = []
    for m in failed:
        if await miner_up(ctx, m, commits[m]):
            by_miner[m] = await check_one(ctx, r, m, commits[m], seed_block, state, mode=by_miner[m].mode)
        else:
            late.append(m)
    if not late:
        return [by_miner[m] for m in sorted(by_miner)]
    info = await ctx.port(ctx.client.round_info, r)
    until = wait_until(int(info["commit_closed_time"]), int(info["score_deadline"]))
    ctx.log.info("waiting for miners that went down mid-check %s", kv(round=r, miners=",".join(late)))
    while late and await ctx.next_block_time() < until:
        await trio.sleep(RECHECK_EVERY_S)
        back = [m for m in late if await miner_up(ctx, m, commits[m])]
        for m in back:  # checked once more: its verdict now stands, whatever it is
            by_miner[m] = await check_one(ctx, r, m, commits[m], seed_block, state, mode=by_miner[m].mode)
        late = [m for m in late if m not in back]
    return [by_miner[m] for m in sorted(by_miner)]
