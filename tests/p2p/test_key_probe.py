"""The live-node probe a node runs before acting for its account: a peer at the registered
address proves the registered key in a Noise handshake, or it does not."""

from __future__ import annotations

import socket
import time

import multiaddr
import trio

from protocol.p2p.host import build_host
from protocol.p2p.key_probe import holds_key
from tests.conftest import free_port
from tests.p2p.conftest import identity


def refuse_all(_peer: object) -> bool:
    return False  # as a running node treats the probe's throwaway identity: dropped after the handshake


async def _probe_a_listening_node(key: bytes, timeout_s: float = 5.0) -> bool:
    node = identity(60)
    host = build_host(node, admit=refuse_all)
    addr = f"/ip4/127.0.0.1/tcp/{free_port()}"
    async with host.run([multiaddr.Multiaddr(addr)]):
        return await holds_key(addr, key, timeout_s)


def test_a_live_node_proves_its_own_key_though_it_drops_the_probe() -> None:
    assert trio.run(_probe_a_listening_node, identity(60).public_key)


def test_a_live_node_with_another_key_proves_nothing() -> None:
    assert not trio.run(_probe_a_listening_node, identity(61).public_key)


def test_nobody_listening_or_a_malformed_address_is_no_live_node() -> None:
    assert not trio.run(holds_key, f"/ip4/127.0.0.1/tcp/{free_port()}", identity(60).public_key, 5.0)
    assert not trio.run(holds_key, "not a multiaddr", identity(60).public_key, 5.0)


def test_a_silent_listener_is_given_up_on_at_the_timeout() -> None:
    with socket.socket() as silent:  # accepts TCP connections (the backlog) and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        began = time.monotonic()
        assert not trio.run(holds_key, f"/ip4/127.0.0.1/tcp/{silent.getsockname()[1]}", identity(60).public_key, 1.0)
        assert time.monotonic() - began < 1.0 + 2.0  # the timeout, plus 2 s for the host's start and stop
