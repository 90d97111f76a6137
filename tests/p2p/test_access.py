"""Registry-gated access and stake-weighted rate limits, over real hosts."""

from __future__ import annotations

import os

import multiaddr
import pytest
import trio
from libp2p import new_host
from libp2p.custom_types import TProtocol
from libp2p.exceptions import MultiError
from libp2p.network.exceptions import SwarmDialAllFailedError
from libp2p.peer.peerinfo import PeerInfo
from libp2p.security.insecure.transport import PLAINTEXT_PROTOCOL_ID, InsecureTransport
from libp2p.stream_muxer.yamux.yamux import PROTOCOL_ID as YAMUX_PROTOCOL_ID
from libp2p.stream_muxer.yamux.yamux import Yamux
from libp2p.transport.exceptions import SecurityUpgradeFailure

from protocol.p2p import RatePolicy
from protocol.p2p.errors import P2PError, PeerUnavailable, RateLimited
from protocol.p2p.host import key_pair_from_seed

from .conftest import STAKE, cluster, identity, noise_gate

MB = 1024 * 1024


@pytest.mark.trio
async def test_unregistered_peer_is_dropped_at_the_connection(tmp_path):
    """Issue 13 rule 8: the server drops the stranger right after the Noise handshake (so
    the stranger sees its dial fail, typed), while a registered member is served."""
    with trio.fail_after(30):
        async with cluster(tmp_path, 3, register=False) as c:
            server, member, stranger = c.nodes
            c.register_all([0, 1])
            h = c.stores[0].put(os.urandom(10_000))
            with pytest.raises(PeerUnavailable):
                await stranger.fetch_blob(server.identity.public_key, h)
            assert server.host.get_network().get_connections(stranger.peer_id) == []
            assert noise_gate(server).refused >= 1
            assert len(await member.fetch_blob(server.identity.public_key, h)) == 10_000


@pytest.mark.trio
async def test_plaintext_only_client_cannot_connect(tmp_path):
    with trio.fail_after(30):
        async with cluster(tmp_path, 2) as c:
            server, member = c.nodes
            kp = key_pair_from_seed(identity(99).seed)
            plain = new_host(
                key_pair=kp,
                sec_opt={TProtocol(PLAINTEXT_PROTOCOL_ID): InsecureTransport(kp)},
                muxer_opt={TProtocol(YAMUX_PROTOCOL_ID): Yamux},
            )
            async with plain.run([multiaddr.Multiaddr("/ip4/127.0.0.1/tcp/0")]):
                # a TooSlowError (a hang, not a refusal) is not caught here and fails the test
                with pytest.raises(SwarmDialAllFailedError) as info:
                    with trio.fail_after(10):
                        await plain.connect(
                            PeerInfo(server.peer_id, [multiaddr.Multiaddr(server.listen_addr)])
                        )
                # the dial failed at security negotiation, not at TCP or the muxer
                causes = info.value.__cause__
                assert isinstance(causes, MultiError) and causes.errors
                assert all(isinstance(e.__cause__, SecurityUpgradeFailure) for e in causes.errors)
                assert server.peer_id not in plain.get_network().connections
            h = c.stores[0].put(b"still serving")
            assert await member.fetch_blob(server.identity.public_key, h) == b"still serving"


async def _flood(node, server_key: bytes, h: bytes, outcomes: dict[str, int]) -> None:
    try:
        await node.fetch_blob(server_key, h)
        outcomes["ok"] += 1
    except RateLimited:
        outcomes["limited"] += 1
    except P2PError:
        outcomes["other"] += 1


@pytest.mark.trio
async def test_rate_limits_throttle_a_flooder_not_a_good_peer(tmp_path):
    policy = RatePolicy(base_requests_per_s=4.0, base_bytes_per_s=4 * MB, burst_seconds=1.0)
    with trio.fail_after(60):
        async with cluster(tmp_path, 3, rate_policy=policy) as c:
            server, flooder, good = c.nodes
            # the flooder has minimal standing, the good peer a large stake and top reputation
            c.registries[0].update_standing(flooder.identity.public_key, 0, 0)
            c.registries[0].update_standing(good.identity.public_key, 5 * STAKE, 65535)
            h = c.stores[0].put(os.urandom(2 * MB))
            outcomes = {"ok": 0, "limited": 0, "other": 0}
            good_times: list[float] = []

            async def good_peer() -> None:
                for _ in range(5):
                    t0 = trio.current_time()
                    assert len(await good.fetch_blob(server.identity.public_key, h)) == 2 * MB
                    good_times.append(trio.current_time() - t0)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(good_peer)
                for _ in range(3):  # waves of 10 concurrent requests
                    async with trio.open_nursery() as wave:
                        for _ in range(10):
                            wave.start_soon(_flood, flooder, server.identity.public_key, h, outcomes)
            assert len(good_times) == 5
            assert outcomes["limited"] >= 20, outcomes
            assert outcomes["ok"] <= 6, outcomes
            assert server.server.refusals["RATE_LIMITED"] == outcomes["limited"]
