"""Two p2p nodes in one process logging as a node does off a terminal (JSON lines on stderr):
both start, one fetches a blob from the other, the other leaves, then the first stops; then
py-libp2p's routine shutdown records and one other warning are logged on its own loggers.

    python -m tests.p2p.log_cycle STORE_DIR

tests/p2p/test_libp2p_logs.py reads its stderr."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

import trio

from protocol.node.json_logs import LogFormat, stream_handler
from protocol.node.logs import quiet_noisy_loggers
from protocol.p2p import DirectoryBlobSource, P2PNode, RegistryView
from protocol.p2p.errors import P2PError

from .conftest import CHAIN_ID, CONTRACT, entry_for, identity, p2p_config

OTHER_WARNING = "a py-libp2p warning that is not routine"


async def cycle(root: Path) -> None:
    regs = [RegistryView(CHAIN_ID, CONTRACT) for _ in range(2)]
    stores = [DirectoryBlobSource(root / f"store{i}") for i in range(2)]
    nodes = [P2PNode(identity(i), p2p_config(), regs[i], stores[i]) for i in range(2)]
    blob = stores[1].put(os.urandom(100_000))
    async with nodes[0].run():
        async with nodes[1].run():
            for reg in regs:
                for i, node in enumerate(nodes):
                    reg.upsert(entry_for(i, node.listen_addr))
            await nodes[0].connect(nodes[1].p2p_addr)
            await nodes[0].fetch_blob(nodes[1].identity.public_key, blob)
        # node 1 left: asking it again fails with a typed error (py-libp2p logs the stream it
        # could not open), and node 0 redials it in the background until it stops too
        try:
            with trio.fail_after(30):
                await nodes[0].fetch_blob(nodes[1].identity.public_key, blob)
        except P2PError:
            pass
        else:
            raise AssertionError("a node that left still served a blob")


def main() -> None:
    logging.basicConfig(level=logging.INFO, handlers=[stream_handler(sys.stderr, LogFormat.JSON)])
    quiet_noisy_loggers()
    trio.run(cycle, Path(sys.argv[1]))
    # what py-libp2p logs for routine events (as it words them), and one warning that is not
    logging.getLogger("libp2p.network.swarm").warning(
        "[ADDCONN_FAIL] add_conn failed for peer %s: %r\n%s", "peer",
        RuntimeError("Cannot schedule task after service has stopped"), "Traceback ...")
    logging.getLogger("libp2p.network.swarm").warning(  # a peer that left while its connection was added
        "[ADDCONN_FAIL] add_conn failed for peer %s: %r\n%s", "peer",
        RuntimeError("Connection closed while starting"), "Traceback ...")
    logging.getLogger("libp2p.network.swarm").warning(
        "Swarm::add_conn | muxer event_started set but is_established=False for peer x")
    logging.getLogger("libp2p.host.basic_host").error(
        "Failed to open stream to peer x:\n  Error: handshake read failed: stream closed")
    logging.getLogger("libp2p.network.swarm").warning(OTHER_WARNING)


if __name__ == "__main__":
    main()
