"""A committed step count the run does not allow (capacity-scaled work): the check fails as a
derivation fault before anything is fetched, and a voter confirms the report; an allowed count
is checked under its own shorter trace shape."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest
import trio
from eth_account import Account

from protocol.chain.client import Vote
from protocol.config.run_setup import Setup, TrainingSpec
from protocol.core.crypto.signing import NodeIdentity
from protocol.core.proof.challenge import make_challenge
from protocol.core.proof.commitment import Commit
from protocol.core.settlement.fraud import FraudKind
from protocol.core.train.compute_config import ComputeConfig, StepCountError
from protocol.node.context import NodeContext
from protocol.node.keys import NodeKeys
from validator.checks import check_one
from validator.disputes import Disputes

CFG = ComputeConfig()  # H = 30, k = 3
MINER = "0x" + "aa" * 20
REPORTER = "0x" + "11" * 20
SEED_BLOCK = b"\x55" * 32
SETUP = Setup(TrainingSpec(), b"\x07" * 32)  # the default run, resolved as a node does
assert SETUP.compute == CFG


def _ctx(identity: NodeIdentity, commit: Commit) -> SimpleNamespace:
    ctx = SimpleNamespace(setup=SETUP, keys=NodeKeys(Account.create(), identity),
                          node_key_of={REPORTER: identity.public_key}.get, log=logging.getLogger("test.check"))

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
    for class_bound in (True, False):  # the miner's class is held (exact) or nobody's (tolerance)
        report = {"round": 2, "miner": MINER, "reporter": REPORTER, "kind": FraudKind.DERIVATION,
                  "segment": check.challenge.segments[0], "class_bound": class_bound}
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
    assert ctx.challenge_compute(Commit(b"", b"", 0, 0)) == CFG  # 0 stands for H (the run's config: a fresh one per read)


def test_a_step_count_the_run_does_not_allow_scores_zero_and_the_rest_are_scored(tmp_path, profile):
    """A miner that commits an invalid count must not stop the validator's scoring (it would,
    if the worker tried to build that miner's config): it scores 0, everyone else is scored."""
    import sysconfig
    from pathlib import Path

    from protocol.config.run_setup import DatasetSpec, Setup, TrainingSpec
    from protocol.config.run_state import load_dataset
    from protocol.core.aggregation.state import decode_state
    from protocol.core.proof.envelope import encode_envelope
    from protocol.core.proof.submission import honest
    from protocol.core.train.training import RoundTask
    from protocol.node.global_model import genesis_blob
    from validator.work import ScoreJob, scored_miners

    stdlib = Path(sysconfig.get_paths()["stdlib"])
    for name in ("argparse.py", "typing.py", "dataclasses.py"):
        (tmp_path / f"{name}.txt").write_bytes((stdlib / name).read_bytes())
    spec = TrainingSpec(preset="micro", profile=profile, classes=[profile],
                        dataset=DatasetSpec(source="folder", path=str(tmp_path), page_tokens=1024, heldout_every=4),
                        compute={"batch_size": 4, "pages_per_miner": 2, "score_batches": 8})
    run_seed = b"\x07" * 32
    blob, state_hash = genesis_blob(spec)
    setup = Setup(spec, run_seed)
    ds, theta = load_dataset(spec.dataset), decode_state(blob, setup.model, state_hash).params
    entries = []
    for i, (trained, committed) in enumerate(((30, 0), (9, 9), (30, 4))):
        miner = "0x" + bytes([0xB0 + i]).hex() * 20
        t = RoundTask(run_seed, 1, bytes.fromhex(miner[2:]), setup.model, setup.compute.with_steps(trained))
        sub = honest(t, ds, theta, None)
        envelope = encode_envelope(1, "0x" + "cc" * 20, 1, miner, sub.trace, sub.blob)
        entries.append((miner, i, envelope, True, committed))
    job = ScoreJob(spec, run_seed, 1, blob, state_hash, entries, b"\x09" * 32, 1 << 26)
    scored = {m.lower(): s for m, s in scored_miners(job).items()}
    full, short, invalid = (e[0] for e in entries)
    assert scored[invalid] == (0, "nothing scored") and scored[full][0] > 0 and scored[short][0] > 0


def test_a_claim_that_a_miner_with_a_disallowed_count_passed_fails_its_audit():
    from validator.audits import Claim, _audit_once

    me = NodeIdentity.generate()
    commit = Commit(b"\x01" * 32, b"\x02" * 32, 0, 4)
    ctx = _ctx(me, commit)
    ctx.steps_allowed = lambda c: NodeContext.steps_allowed(ctx, c)  # type: ignore[arg-type]
    sig = make_challenge(me, 2, bytes.fromhex(MINER[2:]), SEED_BLOCK, CFG).signature
    claim = Claim(2, REPORTER, MINER, 0, 40000, b"\x33" * 32, sig)  # a made-up witness and score
    result = trio.run(_audit_once, ctx, claim, SEED_BLOCK)
    assert result.failed and "step count is not allowed" in result.detail and not result.retry
