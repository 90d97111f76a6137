"""A validator that crashed after revealing is not a lazy one (seen in the churn soak).

Until its witness bundle is served, an auditor reads its witnesses and σ as blanks. Blanks
used to be audited as they were: a zero σ "does not verify", so honest auditors reported the
crashed validator as lazy and honest voters confirmed it, slashing an honest node. Now an
unserved claim is asked for again until shortly before reporting closes; a report filed because
a bundle was never served is void (`served`) when voters are served one that holds, and a
served bundle that does not hold is confirmed whatever the reporter wrote."""

from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace

import trio

from protocol.chain.client import Vote
from protocol.config.run_setup import Setup, TrainingSpec
from protocol.core.crypto.hashing import blake3_hash
from protocol.core.crypto.signing import NodeIdentity
from protocol.core.proof.challenge import make_challenge
from protocol.core.proof.commitment import Commit
from protocol.core.proof.witness import NO_WITNESS
from protocol.core.proof.witness_bundle import SIG_BYTES
from protocol.core.settlement.class_checks import CheckMode
from protocol.core.settlement.fraud import FraudKind
from protocol.core.train.compute_config import ComputeConfig
from protocol.node.context import NodeContext
from protocol.node.node_config import NodeConfig
from validator.audits import (
    UNSERVED,
    Claim,
    _audit_once,
    audit_claim,
    claims_of,
    lazy_evidence,
    unserved_evidence,
)
from validator.disputes import Disputes

CFG = ComputeConfig()  # H = 30, k = 3
MINER = "0x" + "aa" * 20
ACCUSED = "0x" + "11" * 20
SEED_BLOCK = b"\x55" * 32
R = 2
BLANK = bytes(SIG_BYTES)
SETUP = Setup(TrainingSpec(), b"\x07" * 32)  # the default run, resolved as a node does
assert SETUP.compute == CFG


def _ctx(identity: NodeIdentity, served_after: int, score: int, sig: bytes) -> SimpleNamespace:
    """A validator context whose view of ACCUSED's bundle is unserved for `served_after` reads.
    The miner committed a step count the run does not allow (4), so a claim whose σ verifies
    fails its audit at once with a detail that shows the σ was checked, with no replay."""
    ctx = SimpleNamespace(setup=SETUP, config=NodeConfig(data_dir=Path("unused"), poll_s=0.01),
                          node_key_of={ACCUSED: identity.public_key}.get, log=logging.getLogger("test.audit"))
    reads = {"n": 0}

    async def reveals(r: int) -> dict:
        reads["n"] += 1
        served = reads["n"] > served_after
        witness = b"\x33" * 32 if served and score else NO_WITNESS  # a made-up witness of a passed check
        return {ACCUSED: {"miners": [MINER], "scores": [score], "witnesses": [witness],
                          "sigs": [sig if served else BLANK], "served": served}}

    async def commits(r: int) -> dict[str, Commit]:
        return {MINER: Commit(b"\x01" * 32, b"\x02" * 32, 0, 4)}

    async def mode(r: int, miner: str) -> CheckMode:
        return CheckMode.EXACT

    ctx.reveals, ctx.commits, ctx.classes = reveals, commits, SimpleNamespace(mode=mode)
    ctx.compute_for = lambda c: NodeContext.compute_for(ctx, c)  # type: ignore[arg-type]
    ctx.challenge_compute = lambda c: NodeContext.challenge_compute(ctx, c)  # type: ignore[arg-type]
    ctx.steps_allowed = lambda c: NodeContext.steps_allowed(ctx, c)  # type: ignore[arg-type]
    return ctx


def _signed(identity: NodeIdentity) -> bytes:
    return make_challenge(identity, R, bytes.fromhex(MINER[2:]), SEED_BLOCK, CFG).signature


def _unserved_claim(ctx: SimpleNamespace) -> Claim:
    return claims_of(R, trio.run(ctx.reveals, R))[ACCUSED][0]


def test_an_unserved_claim_is_asked_for_again_not_read_as_a_forged_signature():
    me = NodeIdentity.generate()
    ctx = _ctx(me, served_after=10**6, score=40000, sig=_signed(me))
    claim = _unserved_claim(ctx)
    assert not claim.served and claim.sig == BLANK
    once = trio.run(_audit_once, ctx, claim, SEED_BLOCK)
    assert once.retry and once.detail == UNSERVED and "signature" not in once.detail
    # what the auditor files once it stops waiting is the evidence voters void when the bundle holds
    assert lazy_evidence(claim, once) == unserved_evidence()


def test_a_bundle_served_while_the_auditor_waits_is_audited_with_its_own_signature():
    me = NodeIdentity.generate()
    ctx = _ctx(me, served_after=3, score=40000, sig=_signed(me))
    result = trio.run(audit_claim, ctx, _unserved_claim(ctx), SEED_BLOCK, 1e9)  # the trio clock never gets there
    assert result.failed and "step count is not allowed" in result.detail  # σ verified, then the real finding


def _judge(ctx: SimpleNamespace, evidence: bytes) -> tuple[Vote | None, str]:
    d = Disputes.__new__(Disputes)
    d.ctx = ctx  # type: ignore[assignment]
    report = {"round": R, "miner": ACCUSED, "reporter": "0x" + "22" * 20, "kind": FraudKind.LAZY_VALIDATOR,
              "segment": 0, "evidence_hash": evidence}

    async def judge() -> tuple[Vote | None, str]:
        return await d._judge_audit(report, SEED_BLOCK, trio.current_time() + 5.0)

    return trio.run(judge)


def test_a_report_filed_for_an_unserved_bundle_that_holds_is_void_not_rejected():
    me = NodeIdentity.generate()
    # it claimed no check of the miner (score 0, no witness): once served, that holds
    vote, found = _judge(_ctx(me, served_after=2, score=0, sig=BLANK), unserved_evidence())
    assert vote is Vote.SERVED, found


def test_any_other_report_that_does_not_hold_is_still_rejected():
    me = NodeIdentity.generate()
    other = blake3_hash("lazy-evidence", b"\x07" * 32, b"witness differs from the replay")
    vote, found = _judge(_ctx(me, served_after=2, score=0, sig=BLANK), other)
    assert vote is Vote.REJECT, found


def test_a_served_bundle_with_a_forged_signature_is_confirmed_whatever_the_evidence():
    me, forger = NodeIdentity.generate(), NodeIdentity.generate()
    ctx = _ctx(me, served_after=2, score=40000, sig=_signed(forger))  # σ by a key that is not the accused's
    vote, found = _judge(ctx, unserved_evidence())
    assert vote is Vote.CONFIRM and "signature" in found, found
