"""A validator's round of a staged run (docs/PROTOCOL.md §16.5, §16.8): the round's pipelines from
chain data, a check of every stage miner this validator decides, and the score job that scores
each pipeline's combined update and splits it among the stages."""

from __future__ import annotations

from collections.abc import Sequence

import trio

from protocol.core.proof.commitment import Commit
from protocol.core.settlement.class_checks import CheckMode
from protocol.node.context import NodeContext
from protocol.node.stage_pipelines import round_pipelines
from validator.checks import PREFETCH, MinerCheck, not_checked
from validator.stage_checks import check_stage_one, fetch_stage_submission
from validator.stage_scoring import PipelineEntries, StagedEntry, StageScoreJob


async def stage_checks(ctx: NodeContext, r: int, commits: dict[str, Commit], seed_block: bytes,
                       state: tuple[bytes, bytes], modes: dict[str, CheckMode]) -> list[MinerCheck]:
    """Every committed stage miner checked as `modes` says (a stage of a class others decide is
    not checked), in miner order."""
    pipelines = await round_pipelines(ctx, r)
    limiter = trio.CapacityLimiter(PREFETCH)
    done: dict[str, MinerCheck] = {}

    async def one(miner: str, commit: Commit) -> None:
        mode = modes.get(miner, CheckMode.EXACT)
        if mode is not CheckMode.EXACT:  # a stage is replayed only in its own class: no tolerance replay
            mode = CheckMode.SKIP if mode is CheckMode.TOLERANCE else mode
        if not mode.checks:
            done[miner] = not_checked(ctx, r, miner, commit, seed_block, mode)
            return
        async with limiter:
            done[miner] = await check_stage_one(ctx, r, miner, commit, seed_block, state, pipelines)

    async with trio.open_nursery() as nursery:
        for miner, commit in sorted(commits.items()):
            nursery.start_soon(one, miner, commit)
    return [done[m] for m in sorted(done)]


async def stage_score_job(ctx: NodeContext, r: int, commits: dict[str, Commit], checks: Sequence[MinerCheck],
                          state: tuple[bytes, bytes], validator_seed: bytes) -> StageScoreJob:
    """The round's pipelines with what each stage committed: checked here, its envelope and verdict;
    decided by others, its envelope fetched and taken as passed (their verdict decides its column)."""
    by_miner = {c.miner: c for c in checks}
    pipelines = []
    for members in await round_pipelines(ctx, r):
        stages: list[StagedEntry | None] = []
        for miner in members:
            commit = commits.get(miner)
            if commit is None:
                stages.append(None)
                continue
            check = by_miner.get(miner)
            if check is not None and check.mode.checks:
                stages.append(StagedEntry(miner, commit.column, check.envelope, check.outcome.kind is None))
            else:
                envelope, _ = await fetch_stage_submission(ctx, r, miner, commit)
                stages.append(StagedEntry(miner, commit.column, envelope, envelope is not None))
        pipelines.append(PipelineEntries(tuple(members), tuple(stages)))
    return StageScoreJob(ctx.setup.spec, ctx.setup.run_seed, r, state[0], state[1], pipelines, validator_seed,
                         ctx.caps.update)
