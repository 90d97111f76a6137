"""Stage miners as nodes (PROTOCOL.md §16.3–16.5): two `StageMinerNode`s on the embedded chain,
registered for stages 0 and 1 of a staged Llama run, find their seats in round 0's pipeline from
chain data, train their stages over the stage link in their own profile workers, and commit.

What the chain and the network then hold is checked as a validator would: each committed update
hash opens (fetched over libp2p) to a stage envelope bound to its miner and seat whose trace hashes
to the committed trace root; every segment bundle, fetched from the stage over libp2p, replays
exactly under the run's profile; what stage 0 committed as sent is what stage 1 committed as
received, every received tensor signed by its sender; and the pipeline trained its stage-0
miner's data pages (a different pipeline account gives different bits). Before the commit phase
closes, nobody is served a bundle."""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass

import pytest
import trio

from miner.stage_cheat import ForkingStage, LazyStage, StageCheat
from miner.stage_node import StageMinerNode
from protocol.chain.client import ChainClient, Phase, Role
from protocol.chain.deploy import deploy
from protocol.chain.devchain import DevChain
from protocol.chain.registration import register_node
from protocol.config.run_config import TOKEN_UNIT, ChainParams, GenesisAllocation, RunConfig
from protocol.config.run_setup import Setup, resolve
from protocol.core.aggregation.state import decode_all
from protocol.core.crypto.hashing import content_hash
from protocol.core.crypto.signing import NodeIdentity
from protocol.core.hardware.stage_classes import miner_mask, validator_mask
from protocol.core.pipeline.attribution import Domain
from protocol.core.pipeline.segment_bundle import decode_segment
from protocol.core.pipeline.stage_envelope import (
    check_stage_binding,
    decode_stage_envelope,
    encode_stage_envelope,
)
from protocol.core.pipeline.stage_replay import StageReplayStatus
from protocol.core.pipeline.stage_slots import StageSeat
from protocol.core.pipeline.stage_trace import stage_trace_root
from protocol.core.settlement.fraud import FraudKind
from protocol.core.train.compress import compress, encode_update
from protocol.devnet.network import free_port
from protocol.node.context import NodeContext
from protocol.node.keys import NodeKeys
from protocol.node.node_config import NodeConfig
from protocol.node.pinning import prepare
from protocol.node.stage_pipelines import round_pipelines
from protocol.node.worker_pool import AsyncWorker, ProfileWorker
from tests.integration.stage_replays import ENVELOPE_CAP, replay_all
from validator.checks import MinerCheck
from validator.stage_checks import check_stage_one, stage_audit_replay
from validator.stage_work import StageCheckJob, check_stage_miner
from validator.work import AuditReplay

pytestmark = pytest.mark.slow

TRAINING = {"preset": "llama-micro", "stages": 2, "microbatches": 2,
            "compute": {"inner_steps": 4, "checkpoint_every": 2, "batch_size": 4}}
ROUND = 0


def staged_config(accounts: list) -> RunConfig:
    chain = {"commit_duration": 300, "score_duration": 300, "reveal_duration": 60, "audit_duration": 60,
             "challenge_window": 60, "result_duration": 90, "result_challenge_window": 16, "unbonding_delay": 900}
    return RunConfig(run_name="stage-miners", chain=ChainParams(**chain), training=TRAINING,
                     genesis=[GenesisAllocation(address=a.address, amount=10_000) for a in accounts])


async def until(condition) -> None:
    """Poll the chain or the nodes until `condition()` holds (the test's fail_after bounds it)."""
    while not await trio.to_thread.run_sync(condition):
        await trio.sleep(0.5)


@dataclass
class Served:
    setup: Setup
    miners: list[str]
    envelopes: list[bytes]
    bundles: list[list[bytes]]
    checks: list[MinerCheck]  # the validator's, stage by stage, every segment challenged
    audits: list[AuditReplay | None]  # an auditor's replay of the same segments, stage by stage
    job: StageCheckJob  # the validator's check of stage 0, segment 0 challenged (the last replayed for its update)


async def run_round(tmp_path, worker: ProfileWorker, cheat: StageCheat | None) -> Served:
    """Round 0 of two stage miners (stage 0 cheating as `cheat` when given) and a validator on a fresh chain."""
    dev = DevChain(funded_accounts=3)
    accounts = dev.node_accounts()[:3]
    try:
        config = prepare(staged_config(accounts), worker)
        admin = ChainClient(dev.handle, deploy(dev.handle, dev.deployer, config, progress=lambda m: None),
                            dev.deployer)
        setup = resolve(config)
        classes, permitted, profile = setup.spec.classes, setup.stage_permitted, setup.profile
        dev.start()
        validator = node_on(admin, accounts[2], tmp_path / "validator", Role.VALIDATOR,
                            validator_mask(classes, permitted, profile))  # a round opens only with a validator
        nodes = [node_on(admin, accounts[s], tmp_path / f"stage{s}", Role.MINER,
                         miner_mask(classes, permitted, profile, s), stage=s, cheat=cheat if s == 0 else None)
                 for s in range(2)]
        admin.start()
        validator.worker = AsyncWorker(worker)
        async with trio.open_nursery() as nursery, validator.p2p.run():
            for node in nodes:
                nursery.start_soon(node.run)
            with trio.fail_after(300):
                served = await fetch_and_check(admin, setup, nodes, validator)
            nursery.cancel_scope.cancel()
        return served
    finally:
        dev.stop()


def node_on(admin: ChainClient, account, data_dir, role: Role, mask: int, **extra):
    client, identity = admin.with_account(account), NodeIdentity.generate()
    listen = f"/ip4/127.0.0.1/tcp/{free_port()}"
    params = client.deployment.run_config.chain
    register_node(client, role, identity, listen)
    client.set_hardware_classes(mask)
    client.stake(((params.min_miner_stake if role == Role.MINER else params.min_validator_stake) + 100) * TOKEN_UNIT)
    keys, log = NodeKeys(account, identity), logging.getLogger(f"t.{data_dir.name}")
    if role == Role.VALIDATOR:
        return NodeContext(client, keys, NodeConfig(data_dir=data_dir, listen=listen), log)
    cfg = NodeConfig(data_dir=data_dir, listen=listen, max_rounds=1, stage=extra["stage"], stage_wait_s=60)
    return StageMinerNode(client, keys, cfg, log, cheat=extra["cheat"])


async def fetch_and_check(admin: ChainClient, setup: Setup, nodes: list[StageMinerNode],
                          validator: NodeContext) -> Served:
    miners = [n.address for n in nodes]
    await until(lambda: all(admin.call("rounds", "has_committed", ROUND, m) for m in miners))
    await until(lambda: admin.phase(ROUND) > Phase.COMMIT)
    await until(lambda: all((n.segments.root / str(ROUND)).is_dir() for n in nodes))
    await validator.sync.refresh()
    commits = await validator.commits(ROUND)
    envelopes, bundles = [], []
    for s, node in enumerate(nodes):
        commit = commits[node.address]
        got = await validator.p2p.fetch_blob(node.keys.identity.public_key, commit.update_hash, max_bytes=ENVELOPE_CAP)
        assert isinstance(got, bytes) and content_hash(got) == commit.update_hash
        envelopes.append(got)
        env = decode_stage_envelope(got, ENVELOPE_CAP)
        check_stage_binding(env, admin.handle.chain_id, admin.rounds.address, ROUND, node.address)
        assert env.seat == StageSeat(ROUND, 0, s, 2) and commit.steps == 4
        assert bytes(stage_trace_root(env.trace)) == commit.trace_root
        bundles.append([await validator.p2p.fetch_stage_segment(node.keys.identity.public_key, ROUND,
                                                                 commit.trace_root, j, 1 << 24)
                        for j in range(env.trace.segments)])
    pipelines = await round_pipelines(validator, ROUND)
    assert pipelines == [tuple(miners)]
    state = await validator.state_for(ROUND)
    seed = (await validator.port(admin.round_info, ROUND))["seed"]
    checks = [await check_stage_one(validator, ROUND, m, commits[m], bytes(seed), state, pipelines, (0, 1))
              for m in miners]
    audits = [await stage_audit_replay(validator, ROUND, m, (0, 1)) for m in miners]
    keys = tuple(n.keys.identity.public_key for n in nodes)
    domain = Domain(admin.handle.chain_id, bytes.fromhex(admin.staking.address[2:]))
    job = StageCheckJob(setup.spec, setup.run_seed, miners[0], tuple(miners), keys, domain, state[0], state[1],
                        envelopes[0], ENVELOPE_CAP, {0: bundles[0][0], 1: bundles[0][1]}, (0,))
    return Served(setup, miners, envelopes, bundles, checks, audits, job)


@pytest.fixture(scope="module")
def worker():
    with ProfileWorker(resolve(staged_config([])).spec.profile) as w:
        yield w.ready()


@pytest.mark.trio
async def test_two_stage_miners_train_their_pipeline_over_the_link_and_commit_replayable_stages(tmp_path, worker):
    got = await run_round(tmp_path, worker, cheat=None)
    setup, miners = got.setup, got.miners
    statuses = [worker.call(replay_all, setup.spec, setup.run_seed, miners, got.envelopes[s], got.bundles[s])
                for s in range(2)]
    assert statuses == [[StageReplayStatus.EXACT] * 2] * 2
    # the pipeline trains its stage-0 miner's pages: another pipeline account, other bits
    other_pages = worker.call(replay_all, setup.spec, setup.run_seed, miners[::-1], got.envelopes[0], got.bundles[0][:1])
    assert other_pages != [StageReplayStatus.EXACT]
    check_boundaries(got)
    assert [c.outcome.kind for c in got.checks] == [None, None], [c.outcome.detail for c in got.checks]
    # a stage that trained honestly but commits another update fails on derivation (its last
    # segment is replayed for the update even when only the first is challenged)
    assert worker.call(check_stage_miner, got.job).kind is None
    env = decode_stage_envelope(got.envelopes[0], ENVELOPE_CAP)
    forged = encode_stage_envelope(env.header.chain_id, env.header.contract, env.header.miner, env.seat, env.trace,
                                   scaled_update(env.update, setup))
    verdict = worker.call(check_stage_miner, dataclasses.replace(got.job, envelope=forged))
    assert verdict.kind is FraudKind.DERIVATION and verdict.segment is None, verdict
    # an auditor's replay reproduces each check's witness hashes: a validator that did not replay cannot
    for check, audit in zip(got.checks, got.audits, strict=True):
        assert audit is not None and audit.served and audit.matches
        assert audit.inner_hashes == tuple(h for segment in check.outcome.inner_hashes for h in segment)
        assert len(audit.inner_hashes) == 4 and len(set(audit.inner_hashes)) == 4


@pytest.mark.trio
async def test_a_lazy_stage_fails_its_check_from_the_segment_it_cheated_in_and_its_neighbour_passes(tmp_path, worker):
    got = await run_round(tmp_path, worker, cheat=LazyStage(from_step=2))
    lazy, honest = got.checks
    assert lazy.outcome.kind is FraudKind.REPLAY and lazy.outcome.segment == 1, lazy.outcome
    assert "step 3" in lazy.outcome.detail
    assert honest.outcome.kind is None, honest.outcome.detail  # fed the lazy stage's tensors, it replays exactly
    # a validator that passed the lazy stage fails its audit: its segments do not replay
    assert got.audits[0] is not None and got.audits[0].served and not got.audits[0].matches
    assert got.audits[1] is not None and got.audits[1].matches
    check_boundaries(got)  # the lazy stage's tensors are what it signed and its neighbour received


@pytest.mark.trio
async def test_a_stage_that_sends_other_tensors_than_it_commits_is_named_by_its_neighbours_signatures(tmp_path, worker):
    """Stage 0 trains and commits honestly but sends stage 1 forked activations from step 3: both
    stages replay exactly (stage 1 trained on what it was signed), and only stage 0's signatures
    in stage 1's served segment show that it signed tensors it did not commit as sent."""
    got = await run_round(tmp_path, worker, cheat=ForkingStage(from_step=3))
    forking, honest = got.checks
    assert forking.outcome.kind is FraudKind.REPLAY and forking.outcome.segment == 1, forking.outcome
    assert "signed 4 tensors it did not commit as sent, first at step 3" in forking.outcome.detail
    assert honest.outcome.kind is None, honest.outcome.detail  # fed the forked tensors, it replays exactly
    assert all(a is not None and a.served and a.matches for a in got.audits)  # each stage's own replays are exact
    setup = got.setup
    statuses = [worker.call(replay_all, setup.spec, setup.run_seed, got.miners, got.envelopes[s], got.bundles[s])
                for s in range(2)]
    assert statuses == [[StageReplayStatus.EXACT] * 2] * 2  # what a check without the neighbour's signatures sees


def scaled_update(update: bytes, setup: Setup) -> bytes:
    """Stage 0's update, twice as large (what a stage that inflates its influence would commit)."""
    cfg = setup.compute
    values = decode_all([update], setup.model, cfg, setup.stage_split.sizes(setup.model)[0])[0][0]
    return encode_update(compress(values * 2, cfg.chunk, cfg.topk, cfg.bits))


def check_boundaries(got: Served) -> None:
    """What stage 0 committed as sent is what stage 1 committed as received and back, each
    received hash signed by its sender."""
    setup, checks = got.setup, got.checks
    k, count, rows = setup.compute.checkpoint_every, setup.spec.microbatches, setup.compute.batch_size // 2
    split = setup.stage_split
    for j in range(2):
        served = [decode_segment(got.bundles[s][j], setup.model, split, StageSeat(ROUND, 0, s, 2), k, count, rows,
                                 j * k) for s in range(2)]
        for first, second in zip(served[0].segment.hashes, served[1].segment.hashes, strict=True):
            assert first.sent_forward == second.received_inputs and second.sent_backward == first.received_grads
        assert all(len(s.signatures) == k for s in served) and checks
