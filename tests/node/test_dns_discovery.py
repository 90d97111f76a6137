"""Discovery by DNS-AID against a real authoritative server (Knot DNS on 127.0.0.1): the
zone comes from `dns_hints.records` on a real deployment, plus forged records; only what
the on-chain registry confirms is dialled, the rest is logged and ignored."""

from __future__ import annotations

import logging

import pytest
import trio

from protocol.chain.backend import connect, dev_account
from protocol.chain.client import ChainClient
from protocol.chain.deploy import deploy
from protocol.chain.scripted import join_network
from protocol.config.run_config import RunConfig
from protocol.core.crypto.signing import NodeIdentity
from protocol.node.dns_hints import dial_dns_hints, records, registry_snapshot
from protocol.p2p.dns_aid import node_label
from protocol.p2p.dns_resolve import DiscoveryConfig, discover
from protocol.p2p.registry import peer_id_of

pytestmark = pytest.mark.knot
DOMAIN = "veritrain.test"
LOG = logging.getLogger("test.dns")


@pytest.fixture(scope="module")
def network():
    handle = connect(None)
    deployer = dev_account(handle)
    client = ChainClient(handle, deploy(handle, deployer, RunConfig()), deployer)
    net = join_network(client, 2, 1, lambda _line: None)
    return client, net


class RecordingP2P:
    """Stands in for P2PNode's dialer only: records what would be dialled."""

    peer_id = "self"

    def __init__(self) -> None:
        self.dialled: list[str] = []

    async def connect(self, addr: str) -> None:
        self.dialled.append(addr)


def forged(domain: str, registered_label: str) -> str:
    """An unregistered node in the index, and a second address for a registered one."""
    stranger = peer_id_of(NodeIdentity.generate().public_key)
    return (f'_index._agents.{domain}. 300 IN TXT "n-deadbeef"\n'
            f'_dnsaddr.n-deadbeef.{domain}. 300 IN TXT "dnsaddr=/ip4/127.0.0.1/tcp/6666/p2p/{stranger}"\n'
            f'_dnsaddr.{registered_label}.{domain}. 300 IN TXT '
            f'"dnsaddr=/ip4/10.6.6.6/tcp/4100/p2p/{{pid}}"\n')


def test_discovery_dials_exactly_the_registered_peers(network, knot, caplog):
    client, net = network
    members = [*net.miners, *net.validators]
    zone = records(client, DOMAIN, LOG)
    first = members[0]
    label = node_label(bytes.fromhex(first.account.address[2:]))
    extra = forged(DOMAIN, label).replace("{pid}", str(peer_id_of(first.identity.public_key)))
    server = knot.serve(DOMAIN, zone + extra)
    registry = registry_snapshot(client, LOG)

    found = discover(DOMAIN, DiscoveryConfig(server=server))
    assert not found.problems
    assert {h.label for h in found.hints} == {node_label(bytes.fromhex(m.account.address[2:]))
                                              for m in members} | {"n-deadbeef"}
    p2p = RecordingP2P()
    with caplog.at_level(logging.INFO, logger="test.dns"):
        dialled = trio.run(dial_dns_hints, p2p, registry, DOMAIN, DiscoveryConfig(server=server), LOG)
    want = {f"{e.multiaddr}/p2p/{peer_id_of(e.node_key)}" for e in registry.entries()}
    assert dialled == len(members) and set(p2p.dialled) == want
    ignored = [r.getMessage() for r in caplog.records if "dns hint ignored" in r.getMessage()]
    assert len(ignored) == 2
    assert any("label=n-deadbeef" in m and "reason=unregistered" in m for m in ignored)
    assert any("addr=/ip4/10.6.6.6/tcp/4100" in m and "reason=address_mismatch" in m for m in ignored)


def test_caps_cut_records_nodes_and_recursion(knot):
    pid = peer_id_of(NodeIdentity.generate().public_key)
    labels = [f"n-{i:08x}" for i in range(6)]
    lines = [f'_index._agents.{DOMAIN}. IN TXT ' + " ".join(f'"{x}"' for x in labels)]
    lines += [f'_dnsaddr.{labels[0]}.{DOMAIN}. IN TXT "dnsaddr=/ip4/127.0.0.1/tcp/{5000 + i}/p2p/{pid}"'
              for i in range(10)]
    # labels[1] -> a -> b -> c: one /dnsaddr/ hop more than the cap of 2
    lines += [f'_dnsaddr.{labels[1]}.{DOMAIN}. IN TXT "dnsaddr=/dnsaddr/a.{DOMAIN}"',
              f'_dnsaddr.a.{DOMAIN}. IN TXT "dnsaddr=/dnsaddr/b.{DOMAIN}"',
              f'_dnsaddr.b.{DOMAIN}. IN TXT "dnsaddr=/dnsaddr/c.{DOMAIN}"',
              f'_dnsaddr.c.{DOMAIN}. IN TXT "dnsaddr=/ip4/127.0.0.1/tcp/7000/p2p/{pid}"',
              # labels[2] -> a2 -> final: within the cap
              f'_dnsaddr.{labels[2]}.{DOMAIN}. IN TXT "dnsaddr=/dnsaddr/a2.{DOMAIN}"',
              f'_dnsaddr.a2.{DOMAIN}. IN TXT "dnsaddr=/ip4/127.0.0.1/tcp/7100/p2p/{pid}"',
              f'_dnsaddr.{labels[3]}.{DOMAIN}. IN TXT "not a dnsaddr"']
    server = knot.serve(DOMAIN, "\n".join(lines) + "\n")

    found = discover(DOMAIN, DiscoveryConfig(server=server, max_records=4, max_nodes=4))
    by_label: dict[str, list[str]] = {}
    for hint in found.hints:
        by_label.setdefault(hint.label, []).append(hint.addr)
    assert len(by_label[labels[0]]) == 4  # 10 records, cut at 4
    assert by_label[labels[2]] == ["/ip4/127.0.0.1/tcp/7100"]
    assert labels[4] not in by_label and labels[5] not in by_label  # past max_nodes: never asked
    problems = {label: type(exc).__name__ for label, exc in found.problems}
    assert problems == {labels[1]: "DnsRecordMalformed", labels[3]: "DnsRecordMalformed"}


def test_missing_index_is_a_typed_error(knot):
    from protocol.p2p.errors import DnsLookupFailed

    server = knot.serve(DOMAIN, "")
    with pytest.raises(DnsLookupFailed):
        discover(DOMAIN, DiscoveryConfig(server=server))
    # a node catches it and carries on: dial_dns_hints logs and dials nothing
    assert trio.run(dial_dns_hints, RecordingP2P(), None, DOMAIN, DiscoveryConfig(server=server), LOG) == 0
