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

import logging

import pytest
import trio

from miner.stage_node import StageMinerNode
from protocol.chain.client import ChainClient, Phase, Role
from protocol.chain.deploy import deploy
from protocol.chain.devchain import DevChain
from protocol.chain.registration import register_node
from protocol.config.run_config import TOKEN_UNIT, ChainParams, GenesisAllocation, RunConfig
from protocol.config.run_setup import resolve
from protocol.core.crypto.hashing import content_hash
from protocol.core.crypto.signing import NodeIdentity
from protocol.core.hardware.stage_classes import miner_mask, validator_mask
from protocol.core.pipeline.attribution import Domain
from protocol.core.pipeline.received_signatures import misreported_slots
from protocol.core.pipeline.segment_bundle import decode_segment
from protocol.core.pipeline.stage_envelope import check_stage_binding, decode_stage_envelope
from protocol.core.pipeline.stage_replay import StageReplayStatus
from protocol.core.pipeline.stage_slots import StageSeat
from protocol.core.pipeline.stage_trace import stage_trace_root
from protocol.devnet.network import free_port
from protocol.node.keys import NodeKeys
from protocol.node.node_config import NodeConfig
from protocol.node.pinning import pin
from protocol.node.worker_pool import ProfileWorker
from tests.integration.stage_replays import ENVELOPE_CAP, replay_all

pytestmark = pytest.mark.slow

TRAINING = {"preset": "llama-micro", "stages": 2, "microbatches": 2,
            "compute": {"inner_steps": 4, "checkpoint_every": 2, "batch_size": 4}}
ROUND = 0


def staged_config(accounts: list) -> RunConfig:
    chain = {"commit_duration": 300, "score_duration": 300, "reveal_duration": 60, "audit_duration": 60,
             "challenge_window": 60, "result_duration": 90, "result_challenge_window": 16, "unbonding_delay": 900}
    return RunConfig(run_name="stage-miners", chain=ChainParams(**chain), training=TRAINING,
                     genesis=[GenesisAllocation(address=a.address, amount=10_000) for a in accounts])


def register(client: ChainClient, role: Role, identity: NodeIdentity, listen: str, mask: int) -> None:
    params = client.deployment.run_config.chain
    register_node(client, role, identity, listen)
    client.set_hardware_classes(mask)
    minimum = params.min_miner_stake if role == Role.MINER else params.min_validator_stake
    client.stake((minimum + 100) * TOKEN_UNIT)


async def until(condition, what: str) -> None:
    """Poll the chain or the nodes until `condition()` holds (the test's fail_after bounds it)."""
    while not await trio.to_thread.run_sync(condition):
        await trio.sleep(0.5)


@pytest.mark.trio
async def test_two_stage_miners_train_their_pipeline_over_the_link_and_commit_replayable_stages(tmp_path):
    dev = DevChain(funded_accounts=3)
    accounts = dev.node_accounts()[:3]
    setup = resolve(staged_config(accounts))
    profile = setup.profile
    worker = ProfileWorker(profile).start()
    try:
        config = pin(staged_config(accounts), worker)
        admin = ChainClient(dev.handle, deploy(dev.handle, dev.deployer, config, progress=lambda m: None),
                            dev.deployer)
        setup = resolve(config)
        classes, permitted = setup.spec.classes, setup.stage_permitted
        dev.start()
        register(admin.with_account(accounts[2]), Role.VALIDATOR, NodeIdentity.generate(), "/ip4/127.0.0.1/tcp/1",
                 validator_mask(classes, permitted, profile))  # a round opens only with a validator
        nodes = []
        for s in range(2):
            client, identity = admin.with_account(accounts[s]), NodeIdentity.generate()
            listen = f"/ip4/127.0.0.1/tcp/{free_port()}"
            register(client, Role.MINER, identity, listen, miner_mask(classes, permitted, profile, s))
            cfg = NodeConfig(data_dir=tmp_path / f"stage{s}", listen=listen, max_rounds=1, stage=s, stage_wait_s=60)
            nodes.append(StageMinerNode(client, NodeKeys(accounts[s], identity), cfg, logging.getLogger(f"t.stage{s}")))
        admin.start()
        miners = [n.address for n in nodes]
        async with trio.open_nursery() as nursery:
            for node in nodes:
                nursery.start_soon(node.run)
            with trio.fail_after(300):
                await until(lambda: all(admin.call("rounds", "has_committed", ROUND, m) for m in miners), "commits")
                await until(lambda: admin.phase(ROUND) > Phase.COMMIT, "the commit phase closed")
                await until(lambda: all((n.segments.root / str(ROUND)).is_dir() for n in nodes), "bundles served")
                commits = await nodes[1].commits(ROUND)
                envelopes, bundles = [], []
                for s, node in enumerate(nodes):
                    commit, other = commits[node.address], nodes[1 - s]
                    got = await other.p2p.fetch_blob(node.keys.identity.public_key, commit.update_hash,
                                                     max_bytes=ENVELOPE_CAP)
                    assert isinstance(got, bytes) and content_hash(got) == commit.update_hash
                    envelopes.append(got)
                    env = decode_stage_envelope(got, ENVELOPE_CAP)
                    check_stage_binding(env, dev.handle.chain_id, admin.rounds.address, ROUND, node.address)
                    assert env.seat == StageSeat(ROUND, 0, s, 2) and commit.steps == 4
                    assert bytes(stage_trace_root(env.trace)) == commit.trace_root
                    bundles.append([await other.p2p.fetch_stage_segment(node.keys.identity.public_key, ROUND,
                                                                         commit.trace_root, j, 1 << 24)
                                    for j in range(env.trace.segments)])
            nursery.cancel_scope.cancel()
        statuses = [worker.call(replay_all, setup.spec, setup.run_seed, miners, envelopes[s], bundles[s])
                    for s in range(2)]
        assert statuses == [[StageReplayStatus.EXACT] * 2] * 2
        # the pipeline trains its stage-0 miner's pages: another pipeline account, other bits
        other_pages = worker.call(replay_all, setup.spec, setup.run_seed, miners[::-1], envelopes[0], bundles[0][:1])
        assert other_pages != [StageReplayStatus.EXACT]
        check_boundaries(setup, nodes, envelopes, bundles, dev.handle.chain_id, bytes.fromhex(admin.staking.address[2:]))
    finally:
        dev.stop()
        worker.close()


def check_boundaries(setup, nodes, envelopes, bundles, chain_id: int, contract: bytes) -> None:
    """What stage 0 committed as sent is what stage 1 committed as received and back, each
    received hash signed by its sender."""
    k, count, rows = setup.compute.checkpoint_every, setup.spec.microbatches, setup.compute.batch_size // 2
    split, keys = setup.stage_split, [n.keys.identity.public_key for n in nodes]
    domain = Domain(chain_id, contract)
    for j in range(2):
        served = [decode_segment(bundles[s][j], setup.model, split, StageSeat(ROUND, 0, s, 2), k, count, rows, j * k)
                  for s in range(2)]
        for first, second in zip(served[0].segment.hashes, served[1].segment.hashes, strict=True):
            assert first.sent_forward == second.received_inputs and second.sent_backward == first.received_grads
        for s in range(2):
            neighbours = (keys[0] if s == 1 else None, keys[1] if s == 0 else None)
            assert misreported_slots(StageSeat(ROUND, 0, s, 2), j * k + 1, served[s].segment.hashes,
                                     served[s].signatures, neighbours, domain) == []
