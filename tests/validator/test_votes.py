"""A voter's judgement of a report before it fetches anything: a decoy report (rule 2) on a
segment its reporter did not challenge, or under a σ that is not the reporter's, is rejected,
so its bond burns; the honest reporter's own report is judged on its own evidence."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import trio

from protocol.chain.client import Vote
from protocol.core.crypto.signing import NodeIdentity
from protocol.core.proof.challenge import make_challenge
from protocol.core.proof.commitment import Commit
from protocol.core.settlement.fraud import FraudKind
from protocol.core.train.compute_config import ComputeConfig
from validator.disputes import Disputes

REPORTER, MINER = "0x" + "11" * 20, "0x" + "aa" * 20
SEED_BLOCK = b"\x44" * 32
CFG = ComputeConfig()


def _disputes(keys: dict[str, bytes]) -> Disputes:
    d = Disputes.__new__(Disputes)  # the judgement needs only keys, the commit and the compute config

    async def commits(r: int) -> dict[str, Commit]:
        return {MINER: Commit(b"\x01" * 32, b"\x02" * 32, 0, 0)}

    d.ctx = SimpleNamespace(node_key_of=keys.get, setup=SimpleNamespace(compute=CFG), commits=commits,  # type: ignore[assignment]
                            challenge_compute=lambda c: CFG.with_steps(c.steps))
    return d


def _report(segment: int, kind: FraudKind = FraudKind.REPLAY) -> dict:
    return {"round": 2, "miner": MINER, "reporter": REPORTER, "kind": kind, "segment": segment}


def test_a_report_on_a_segment_its_reporter_did_not_challenge_is_rejected():
    me = NodeIdentity.generate()
    ch = make_challenge(me, 2, bytes.fromhex(MINER[2:]), SEED_BLOCK, CFG)
    decoy = next(s for s in range(CFG.n_segments) if s not in ch.segments)
    for kind in (FraudKind.REPLAY, FraudKind.UNAVAILABLE):
        vote, why = trio.run(_disputes({REPORTER: me.public_key})._judge_check, _report(decoy, kind), SEED_BLOCK,
                             ch.signature, 0.0)
        assert vote is Vote.REJECT and "not challenged" in why


@pytest.mark.parametrize("case", ["another-key", "another-round"])
def test_a_report_under_a_signature_that_is_not_the_reporters_challenge_is_rejected(case):
    me, other = NodeIdentity.generate(), NodeIdentity.generate()
    ch = make_challenge(other if case == "another-key" else me, 3 if case == "another-round" else 2,
                        bytes.fromhex(MINER[2:]), SEED_BLOCK, CFG)
    vote, why = trio.run(_disputes({REPORTER: me.public_key})._judge_check, _report(ch.segments[0]), SEED_BLOCK,
                         ch.signature, 0.0)
    assert vote is Vote.REJECT and "bad challenge" in why
