"""A committed step count the run does not allow (capacity-scaled work): the check fails as a
derivation fault before anything is fetched, and a voter confirms the report; an allowed count
is checked under its own shorter trace shape."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import trio

from protocol.chain.client import Vote
from protocol.core.commitment import Commit
from protocol.core.fraud import FraudKind
from protocol.core.proof import make_challenge
from protocol.core.signing import NodeIdentity
from protocol.core.training import ComputeConfig, StepCountError
from protocol.node.context import NodeContext
from validator.checks import check_one
from validator.disputes import Disputes

CFG = ComputeConfig()  # H = 30, k = 3
MINER = "0x" + "aa" * 20
REPORTER = "0x" + "11" * 20
SEED_BLOCK = b"\x55" * 32


def _ctx(identity: NodeIdentity, commit: Commit) -> SimpleNamespace:
    ctx = SimpleNamespace(setup=SimpleNamespace(compute=CFG), keys=SimpleNamespace(identity=identity),
                          node_key_of={REPORTER: identity.public_key}.get, log=SimpleNamespace(info=print))

    async def commits(r: int) -> dict[str, Commit]:
        return {MINER: commit}

    async def state_for(r: int) -> tuple[bytes, bytes]:
        return b"state", b"\x00" * 32

    ctx.commits, ctx.state_for = commits, state_for
    ctx.compute_for = lambda c: NodeContext.compute_for(ctx, c)  # type: ignore[arg-type]
    ctx.challenge_compute = lambda c: NodeContext.challenge_compute(ctx, c)  # type: ignore[arg-type]
    return ctx


@pytest.mark.parametrize("steps", [4, 31, 600])
def test_a_step_count_the_run_does_not_allow_fails_as_a_derivation_and_voters_confirm(steps):
    me = NodeIdentity.generate()
    commit = Commit(b"\x01" * 32, b"\x02" * 32, 0, steps)
    ctx = _ctx(me, commit)
    with pytest.raises(StepCountError):
        ctx.compute_for(commit)
    check = trio.run(check_one, ctx, 2, MINER, commit, SEED_BLOCK, (b"state", b"\x00" * 32))
    assert check.outcome.kind is FraudKind.DERIVATION and "step count" in check.outcome.detail
    assert check.envelope is None and check.steps == steps
    # its challenge is drawn over the run's own H/k segments, which the voter rebuilds
    assert check.challenge == make_challenge(me, 2, bytes.fromhex(MINER[2:]), SEED_BLOCK, CFG)
    d = Disputes.__new__(Disputes)
    d.ctx = ctx  # type: ignore[assignment]
    report = {"round": 2, "miner": MINER, "reporter": REPORTER, "kind": FraudKind.DERIVATION,
              "segment": check.challenge.segments[0]}
    vote, found = trio.run(d._judge_check, report, SEED_BLOCK, check.challenge.signature, 0.0)
    assert vote is Vote.CONFIRM and found == "derivation"


def test_an_allowed_shorter_count_draws_its_challenge_from_its_own_segments():
    me = NodeIdentity.generate()
    commit = Commit(b"\x01" * 32, b"\x02" * 32, 0, 9)
    ctx = _ctx(me, commit)
    assert ctx.compute_for(commit).n_segments == 3
    draws = {make_challenge(NodeIdentity(bytes([i + 1]) * 32), 2, bytes.fromhex(MINER[2:]), SEED_BLOCK,
                            ctx.challenge_compute(commit)).segments[0] for i in range(40)}
    assert draws == {0, 1, 2}  # never a segment the 9-step trace does not have
    assert ctx.challenge_compute(Commit(b"", b"", 0, 0)) is CFG  # 0 stands for H
