from __future__ import annotations

import os

import pytest
import trio

from protocol.core.crypto.hashing import content_hash

from .conftest import announcement, cluster


@pytest.mark.trio
async def test_two_nodes_gossip_and_blob(tmp_path):
    with trio.fail_after(30):
        async with cluster(tmp_path, 2) as c:
            a, b = c.nodes
            await b.connect(a.p2p_addr)
            await a.wait_for_topic_peers(1)
            await b.wait_for_topic_peers(1)
            await a.publish(5, announcement(0))
            msg = await b.receive()
            assert msg.payload.body == announcement(0)
            data = os.urandom(3 * 1024 * 1024 + 17)
            h = c.stores[0].put(data)
            got = await b.fetch_blob(a.identity.public_key, h)
            assert got == data and content_hash(got) == h
