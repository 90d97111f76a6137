"""Gossip over real hosts: paced bursts arrive complete and once; bad messages never do."""

from __future__ import annotations

import pytest
import trio

from protocol.core.messages import make_gossip, to_hex
from protocol.p2p import topic_for

from .conftest import (
    CHAIN_ID,
    CONTRACT,
    account,
    announcement,
    cluster,
    forge_pubsub_message,
    inject,
)


async def _collect(node, sink: list, stop: trio.Event) -> None:
    while not stop.is_set():
        sink.append(await node.receive())


@pytest.mark.trio
async def test_paced_burst_of_100_reaches_every_host_once(tmp_path):
    with trio.fail_after(60):
        async with cluster(tmp_path, 5, dial=False) as c:
            pub, *recv = c.nodes
            # a line: pub - r1 - r2 - r3 - r4, so most copies are forwarded over several hops
            chain = [pub, *recv]
            for left, right in zip(chain, chain[1:], strict=False):
                await right.connect(left.p2p_addr)
            for i, node in enumerate(chain):
                await node.wait_for_topic_peers(1 if i in (0, len(chain) - 1) else 2)
            await trio.sleep(1.5)  # one heartbeat so the line's meshes are grafted
            got: list[list] = [[] for _ in recv]
            stop = trio.Event()
            async with trio.open_nursery() as nursery:
                for node, sink in zip(recv, got, strict=True):
                    nursery.start_soon(_collect, node, sink, stop)
                ids = [await pub.publish(5, announcement(0, n)) for n in range(100)]
                with trio.move_on_after(20):
                    while min(len(s) for s in got) < 100:
                        await trio.sleep(0.05)
                await trio.sleep(0.5)  # late duplicates would show up here
                stop.set()
                nursery.cancel_scope.cancel()
            assert len(set(ids)) == 100
            for sink in got:
                bodies = [m.payload.body.update_hash for m in sink]
                assert len(bodies) == 100, f"{[len(s) for s in got]}/100 arrived, rejected {[n.gossip.rejected for n in recv]}"
                assert len(set(bodies)) == 100, "duplicate delivered to the application"


async def _expect_nothing(node, seconds: float) -> None:
    with trio.move_on_after(seconds):
        msg = await node.receive()
        raise AssertionError(f"unexpected delivery: {msg.payload.body}")


@pytest.mark.trio
async def test_bad_messages_are_rejected_and_node_stays_up(tmp_path):
    with trio.fail_after(60):
        async with cluster(tmp_path, 4, register=False) as c:
            honest, victim, attacker, stranger = c.nodes
            c.register_all([0, 1, 2])  # node 3 is nobody's registered peer
            for node in (honest, attacker, stranger):
                await node.connect(victim.p2p_addr)
            await victim.wait_for_topic_peers(3)
            await trio.sleep(1.2)
            topic = topic_for(CHAIN_ID, CONTRACT)

            # 1. an old announcement (round 3) replayed while the chain is at round 5
            old = make_gossip(honest.identity, CHAIN_ID, CONTRACT, 3, announcement(0, 1))
            await inject(attacker, forge_pubsub_message(honest.identity, topic, old, 1))
            # 2. the attacker signs an announcement claiming to be the honest miner
            fake = announcement(0, 2)
            data = make_gossip(attacker.identity, CHAIN_ID, CONTRACT, 5, fake)
            await inject(attacker, forge_pubsub_message(attacker.identity, topic, data, 2))
            # 3. an unregistered node announces for itself
            data = make_gossip(stranger.identity, CHAIN_ID, CONTRACT, 5, announcement(3))
            await inject(stranger, forge_pubsub_message(stranger.identity, topic, data, 3))
            # 4. another deployment's message
            other = make_gossip(honest.identity, CHAIN_ID + 1, CONTRACT, 5, announcement(0, 4))
            await inject(attacker, forge_pubsub_message(honest.identity, topic, other, 4))
            # 5. garbage bytes
            await inject(attacker, forge_pubsub_message(attacker.identity, topic, b"\x00garbage", 5))
            await _expect_nothing(victim, 1.5)
            assert victim.gossip.rejected >= 5

            # a current announcement is delivered once, and a same-round replay is dropped
            good = make_gossip(honest.identity, CHAIN_ID, CONTRACT, 5, announcement(0, 9))
            await inject(honest, forge_pubsub_message(honest.identity, topic, good, 10))
            msg = await victim.receive()
            assert msg.payload.body == announcement(0, 9)
            assert msg.payload.body.miner == to_hex(account(0))
            await inject(attacker, forge_pubsub_message(honest.identity, topic, good, 11))
            await _expect_nothing(victim, 1.0)
