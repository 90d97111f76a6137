"""Does a live node at an address hold a given node key? A Noise handshake proves it.

A node about to act for its account asks this of the address the chain holds for that
account (protocol/node/account_guard.py): a peer there that completes the handshake as the
registered node key is a live node serving the account. The probe dials from a throwaway
identity, so the node probed drops it right after the handshake (it is bound to no account);
the handshake has proved the key by then, and that is all the probe asks.
"""

from __future__ import annotations

import multiaddr
import multiaddr.exceptions
import trio
from libp2p.peer.id import ID
from libp2p.peer.peerinfo import PeerInfo

from protocol.core.crypto.signing import NodeIdentity
from protocol.p2p.errors import PeerNotAdmitted
from protocol.p2p.host import NET_ERRORS, build_host, split_multiaddr
from protocol.p2p.registry import peer_id_of

PROBE_TIMEOUT_S = 5.0  # one dial and one handshake; a live node on any network answers well within it
LOCAL = "/ip4/127.0.0.1/tcp/0"
# a refused dial, another key, or the probed node dropping the probe after the handshake
PROBE_ERRORS: tuple[type[BaseException], ...] = (*NET_ERRORS, PeerNotAdmitted)


async def holds_key(addr: str, node_key: bytes, timeout_s: float = PROBE_TIMEOUT_S) -> bool:
    """Whether a peer listening at `addr` proves, within `timeout_s`, that it holds `node_key`.
    False when nobody answers, the address is malformed, or the peer there holds another key."""
    try:
        target, _ = split_multiaddr(addr)
    except (ValueError, multiaddr.exceptions.Error):
        return False
    expected = peer_id_of(node_key)
    proved: list[ID] = []

    def admit(peer: ID) -> bool:  # called once the handshake proved `peer`'s key
        proved.append(peer)
        return True

    host = build_host(NodeIdentity.generate(), admit=admit)
    async with host.run([multiaddr.Multiaddr(LOCAL)]):
        with trio.move_on_after(timeout_s):
            try:
                await host.connect(PeerInfo(expected, [target]))
            except PROBE_ERRORS:
                pass  # what the handshake proved (if anything) is in `proved`
    return expected in proved


def live_holder(addr: str, node_key: bytes, timeout_s: float = PROBE_TIMEOUT_S) -> bool:
    """`holds_key` from synchronous code (a node before its event loop starts)."""
    return trio.run(holds_key, addr, node_key, timeout_s)
