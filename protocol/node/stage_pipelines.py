"""The round's pipelines as a node reads them from the chain (docs/PROTOCOL.md §16.3): the
miners eligible when the round opened, each one's stage from its on-chain class set, its
verified steps of the last round from the settled result, and the formation seed.

Stage miners and validators derive the same pipelines from the same chain data
(`formation.form_pipelines`);
a miner whose class set names no single stage is no stage miner and is left out.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING

import trio

from protocol.core.crypto.keccak import checksum_address
from protocol.core.hardware.stage_classes import NotOneStage, miner_stage
from protocol.core.pipeline.formation import StageMiner, form_pipelines
from protocol.core.pipeline.round_pipelines import pipeline_seed

if TYPE_CHECKING:  # the node context holds the global state, which reads the pipelines
    from protocol.node.context import NodeContext


async def round_pipelines(ctx: NodeContext, r: int) -> list[tuple[str, ...]]:
    """Round r's pipelines, each its miners stage 0 first: read as the chain stood when the round
    opened (a miner slashed or unbonding later kept its seat), so a miner at round open, a validator
    after the commit phase and an auditor or voter later all derive the same."""
    if r in ctx.formed:
        return ctx.formed[r]
    setup = ctx.setup
    await ctx.sync.refresh()  # registrations up to now; eligibility is read as of the opening block
    opened = await _opening_block(ctx, r)
    opening = await ctx.port(ctx.client.call, "rounds", "opening_clock", r)
    by_stage: list[list[StageMiner]] = [[] for _ in range(setup.spec.stages)]
    for entry in list(ctx.registry.entries()):
        if entry.role != "miner":
            continue
        account = checksum_address("0x" + entry.account.hex())
        since = await ctx.port(_eligible_since, ctx, account, opened)
        if since == 0 or since > opening:
            continue
        try:
            stage = miner_stage(setup.spec.classes, setup.stage_permitted, await ctx.classes.mask(account) or 1)
        except NotOneStage:
            continue
        by_stage[stage].append(StageMiner(account, await verified_steps(ctx, r - 1, account)))
    previous = (await ctx.port(ctx.client.round_info, r - 1))["seed"] if r > 0 else bytes(32)
    seed = pipeline_seed(bytes.fromhex(ctx.client.deployment.run_config_hash), r, bytes(previous))
    ctx.formed[r] = form_pipelines(seed, by_stage)
    return ctx.formed[r]


async def _opening_block(ctx: NodeContext, r: int) -> int:
    """The block whose `RoundOpened` opened round r (waits for it: the round is open when asked)."""
    while True:
        rows = await ctx.port(ctx.opened_log.rows)
        block = next((int(row["_block"]) for row in rows if int(row["round"]) == r), None)
        if block is not None:
            return block
        await trio.sleep(ctx.config.poll_s)


def _eligible_since(ctx: NodeContext, account: str, block: int) -> int:
    return int(ctx.client.staking.functions.eligible_since(account).call(block_identifier=block))


async def verified_steps(ctx: NodeContext, r: int, account: str) -> int:
    """The steps `account` committed in round r if the final result paid its column, else 0."""
    if r < 0:
        return 0
    settled = await trio.to_thread.run_sync(ctx.history.final, r)
    if settled is None or account not in settled.inputs.miners:
        return 0
    if settled.result.consensus[settled.inputs.miners.index(account)] == 0:
        return 0
    commit = (await ctx.commits(r)).get(account)
    if commit is None:
        return 0
    return commit.steps or ctx.setup.compute.inner_steps


async def whole_pipelines(ctx: NodeContext, r: int, chosen: Sequence[str], committed: Collection[str]) -> list[str]:
    """The chosen updates of round r less those of every pipeline one of whose committed stages was
    not chosen (it failed its check, or its column decided 0): a stage's update is kept only with
    its whole pipeline's (PROTOCOL.md §16.8), even when different validators decided its stages."""
    picked = set(chosen)
    dropped = {m for members in await round_pipelines(ctx, r)
               if any(m in committed and m not in picked for m in members) for m in members}
    return [m for m in chosen if m not in dropped]
