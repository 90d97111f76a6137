"""A voter's judgement of a report before it fetches anything: a decoy report (rule 2) on a
segment its reporter did not challenge, or under a σ that is not the reporter's, is rejected,
so its bond burns; the honest reporter's own report is judged on its own evidence."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from protocol.chain.client import Vote
from protocol.core.crypto.signing import NodeIdentity
from protocol.core.proof.challenge import make_challenge
from protocol.core.settlement.fraud import FraudKind
from protocol.core.train.compute_config import ComputeConfig
from protocol.node.context import NodeContext
from tests.node_context import deployed_chain, knows, node_context, round_0_committed
from validator.disputes import Disputes, unavailable_vote

REPORTER = "0x" + "11" * 20
SEED_BLOCK = b"\x44" * 32
CFG = ComputeConfig()


@pytest.fixture(scope="module")
def ctx(tmp_path_factory: pytest.TempPathFactory) -> NodeContext:
    """A voter's real context on a devchain where one staked miner committed in round 0."""
    chain = deployed_chain(accounts=3)
    round_0_committed(chain)
    node = node_context(Path(tmp_path_factory.mktemp("voter")), chain)
    assert node.setup.compute == CFG  # challenges below are drawn under the run's compute config
    return node


@pytest.fixture(scope="module")
def miner(ctx: NodeContext) -> str:
    (address,) = trio.run(ctx.commits, 0)
    return address


def _judge(ctx: NodeContext, reporter: NodeIdentity, report: dict, sig: bytes) -> tuple[Vote, str]:
    return trio.run(Disputes(knows(ctx, {REPORTER: reporter}))._judge_check, report, SEED_BLOCK, sig, 0.0)


def _report(miner: str, segment: int, kind: FraudKind = FraudKind.REPLAY) -> dict:
    return {"round": 0, "miner": miner, "reporter": REPORTER, "kind": kind, "segment": segment}


def test_a_report_on_a_segment_its_reporter_did_not_challenge_is_rejected(ctx, miner):
    me = NodeIdentity.generate()
    ch = make_challenge(me, 0, bytes.fromhex(miner[2:]), SEED_BLOCK, CFG)
    decoy = next(s for s in range(CFG.n_segments) if s not in ch.segments)
    for kind in (FraudKind.REPLAY, FraudKind.UNAVAILABLE):
        vote, why = _judge(ctx, me, _report(miner, decoy, kind), ch.signature)
        assert vote is Vote.REJECT and "not challenged" in why


@pytest.mark.parametrize("case", ["another-key", "another-round"])
def test_a_report_under_a_signature_that_is_not_the_reporters_challenge_is_rejected(ctx, miner, case):
    me, other = NodeIdentity.generate(), NodeIdentity.generate()
    ch = make_challenge(other if case == "another-key" else me, 1 if case == "another-round" else 0,
                        bytes.fromhex(miner[2:]), SEED_BLOCK, CFG)
    vote, why = _judge(ctx, me, _report(miner, ch.segments[0]), ch.signature)
    assert vote is Vote.REJECT and "bad challenge" in why


@pytest.mark.parametrize(("reported", "retried", "vote"), [
    (FraudKind.UNAVAILABLE, False, Vote.REJECT),  # served at the first try: a false report, its bond burns
    (FraudKind.UNAVAILABLE, True, Vote.SERVED),  # only a retry got it: the accused was late and pays the fee
    (FraudKind.REPLAY, False, Vote.REJECT),  # the named segment replays: a false report
    (FraudKind.REPLAY, True, Vote.REJECT),
])
def test_a_segment_that_checks_decides_the_vote_by_the_report_and_the_first_try(reported, retried, vote):
    assert unavailable_vote(reported, retried)[0] is vote
