"""Gossip over real hosts: paced bursts arrive complete and once; bad messages never do."""

from __future__ import annotations

import pytest
import trio

from protocol.core.wire.messages import make_gossip, to_hex
from protocol.p2p import topic_for
from protocol.p2p.errors import PeerUnavailable

from .conftest import (
    CHAIN_ID,
    CONTRACT,
    HandledLog,
    account,
    announcement,
    cluster,
    forge_pubsub_message,
    send_raw,
    wait_for_mesh,
)


class _Sink:
    """Everything `node` delivers, until `sentinel`; `full` once `n` messages arrived."""

    def __init__(self, n: int, sentinel: object) -> None:
        self.n, self.sentinel = n, sentinel
        self.bodies: list[object] = []
        self.full, self.done = trio.Event(), trio.Event()

    async def collect(self, node) -> None:
        while not self.done.is_set():
            body = (await node.receive()).payload.body
            self.bodies.append(body)
            if len(self.bodies) >= self.n:
                self.full.set()
            if body == self.sentinel:
                self.done.set()


async def _all_set(events: list[trio.Event], timeout_s: float, report) -> None:
    with trio.move_on_after(timeout_s) as scope:
        for event in events:
            await event.wait()
    if scope.cancelled_caught:
        raise AssertionError(report())


@pytest.mark.trio
async def test_paced_burst_of_100_reaches_every_host_once(tmp_path):
    with trio.fail_after(60):
        async with cluster(tmp_path, 5, dial=False) as c:
            pub, *recv = c.nodes
            # a line: pub - r1 - r2 - r3 - r4, so most copies are forwarded over several hops
            chain = [pub, *recv]
            for left, right in zip(chain, chain[1:], strict=False):
                await right.connect(left.p2p_addr)
            for i, node in enumerate(chain):  # each node forwards to its line neighbours
                await wait_for_mesh(node, chain[max(0, i - 1) : i] + chain[i + 1 : i + 2])
            sentinel = announcement(0, 100)
            sinks = [_Sink(100, sentinel) for _ in recv]

            def report() -> str:
                counts = [len(s.bodies) for s in sinks]
                return f"{counts}/100 arrived, rejected {[n.gossip.rejected for n in recv]}"

            async with trio.open_nursery() as nursery:
                for node, sink in zip(recv, sinks, strict=True):
                    nursery.start_soon(sink.collect, node)
                ids = [await pub.publish(5, announcement(0, n)) for n in range(100)]
                await _all_set([s.full for s in sinks], 20, report)
                # a last message down the same line: a duplicate of the burst still in
                # flight would be delivered before it
                await pub.publish(5, sentinel)
                await _all_set([s.done for s in sinks], 20, report)
            assert len(set(ids)) == 100
            expected = [announcement(0, n).update_hash for n in range(100)]
            for sink in sinks:
                assert sink.bodies[-1] == sentinel
                hashes = [b.update_hash for b in sink.bodies[:-1]]
                assert len(hashes) == 100, f"{report()}; duplicate delivered to the application"
                assert sorted(hashes) == sorted(expected)


@pytest.mark.trio
async def test_bad_messages_are_rejected_and_node_stays_up(tmp_path):
    with trio.fail_after(60):
        async with cluster(tmp_path, 4, register=False) as c:
            honest, victim, attacker, stranger = c.nodes
            c.register_all([0, 1, 2])  # node 3 is nobody's registered peer
            for node in (honest, attacker):
                await node.connect(victim.p2p_addr)
            with pytest.raises(PeerUnavailable):  # dropped right after the Noise handshake
                await stranger.connect(victim.p2p_addr)
            handled = HandledLog(victim)
            topic = topic_for(CHAIN_ID, CONTRACT)

            def forged(signer, data: bytes, seqno: int):
                return forge_pubsub_message(signer.identity, topic, data, seqno)

            def signed(signer, round_: int, body, chain_id: int = CHAIN_ID) -> bytes:
                return make_gossip(signer.identity, chain_id, CONTRACT, round_, body)

            bad = [
                # 1. an old announcement (round 3) replayed while the chain is at round 5
                (attacker, forged(honest, signed(honest, 3, announcement(0, 1)), 1)),
                # 2. the attacker signs an announcement claiming to be the honest miner
                (attacker, forged(attacker, signed(attacker, 5, announcement(0, 2)), 2)),
                # 3. an unregistered node announces for itself (it cannot connect, so a
                # registered peer forwards it): dropped before any signature check
                (attacker, forged(stranger, signed(stranger, 5, announcement(3)), 3)),
                # 4. another deployment's message
                (attacker, forged(honest, signed(honest, 5, announcement(0, 4), CHAIN_ID + 1), 4)),
                # 5. garbage bytes
                (attacker, forged(attacker, b"\x00garbage", 5)),
            ]
            for sender, msg in bad:
                await send_raw(sender, victim, msg)
            await handled.wait_for([msg for _, msg in bad])

            # the victim has judged all five; had it accepted one, the application would
            # get it before this current announcement
            good = signed(honest, 5, announcement(0, 9))
            await send_raw(honest, victim, forged(honest, good, 10))
            with trio.fail_after(10):
                msg = await victim.receive()
            assert msg.payload.body == announcement(0, 9)
            assert msg.payload.body.miner == to_hex(account(0))
            assert victim.gossip.rejected == 4
            assert victim.gossip.pubsub.not_admitted == 1

            # a same-round replay (same bytes, new seqno) is handled and dropped: the next
            # delivery is a later message, not the announcement a second time
            replay = forged(honest, good, 11)
            await send_raw(attacker, victim, replay)
            await handled.wait_for([replay])
            later = signed(honest, 5, announcement(0, 10))
            await send_raw(honest, victim, forged(honest, later, 12))
            with trio.fail_after(10):
                msg = await victim.receive()
            assert msg.payload.body == announcement(0, 10)
