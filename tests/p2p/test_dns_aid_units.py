"""DNS-AID pure parts: the zone fragment, the record parsers and the registry check."""

from __future__ import annotations

import pytest

from protocol.core.crypto.signing import NodeIdentity, binding_message
from protocol.p2p.dns_aid import KEY_CLASS, KEY_ROLE, KEY_THROUGHPUT, DnsHint, node_label
from protocol.p2p.dns_confirm import confirm
from protocol.p2p.dns_resolve import parse_dnsaddr, parse_index, parse_server
from protocol.p2p.dns_zone import zone_fragment
from protocol.p2p.errors import DnsRecordMalformed
from protocol.p2p.registry import RegistryEntry, RegistryView, peer_id_of

CHAIN_ID, CONTRACT = 31337, b"\x11" * 20


def entry(n: int, role: str = "miner", eligible: bool = True, addr: str | None = None) -> RegistryEntry:
    identity = NodeIdentity(bytes([n]) * 32)
    account = bytes([n]) * 20
    sig = identity.sign(binding_message(CHAIN_ID, CONTRACT, account))
    return RegistryEntry(identity.public_key, account, role, 100, 0,  # type: ignore[arg-type]
                         addr or f"/ip4/127.0.0.1/tcp/{4000 + n}", sig, eligible)


def view(*entries: RegistryEntry) -> RegistryView:
    registry = RegistryView(CHAIN_ID, CONTRACT)
    for e in entries:
        registry.upsert(e)
    return registry


def test_zone_fragment_lists_eligible_nodes_with_private_keys():
    miner, validator = entry(1), entry(2, "validator")
    text = zone_fragment([validator, miner, entry(3, eligible=False)], "example.org", b"\xab" * 32,
                         {miner.account: 1234})
    pid = peer_id_of(miner.node_key)
    assert '_index._agents.example.org. 300 IN TXT "n-01010101" "n-02020202"' in text
    assert (f'_n-01010101._libp2p._agents.example.org. 300 IN SVCB 1 . port=4001 ipv4hint=127.0.0.1 '
            f'key{KEY_ROLE}="miner" key{KEY_CLASS}="{"ab" * 32}" key{KEY_THROUGHPUT}="1234"') in text
    assert f'_dnsaddr.n-01010101.example.org. 300 IN TXT "dnsaddr=/ip4/127.0.0.1/tcp/4001/p2p/{pid}"' in text
    assert 'key65280="validator"' in text and 'key65282="0"' in text  # throughput unknown: 0
    assert "; skipped n-03030303: not eligible in its role" in text


def test_zone_fragment_publishes_each_nodes_registered_class():
    miner, validator = entry(1), entry(2, "validator")
    text = zone_fragment([validator, miner], "example.org", b"\xab" * 32, classes={validator.account: b"\xcd" * 32})
    assert f'key{KEY_CLASS}="{"cd" * 32}"' in text.split("n-02020202._libp2p")[1].splitlines()[0]
    assert f'key{KEY_CLASS}="{"ab" * 32}"' in text.split("n-01010101._libp2p")[1].splitlines()[0]  # the default


def test_zone_fragment_skips_unpublishable_addresses():
    text = zone_fragment([entry(1, addr="/dns4/x.example/tcp/1")], "example.org", b"\x00" * 32)
    assert "skipped n-01010101: registered multiaddr" in text and "_index" not in text


def test_node_label_is_short_and_stable():
    assert node_label(bytes.fromhex("1a2b3c4d" + "00" * 16)) == "n-1a2b3c4d"


def test_parse_dnsaddr():
    pid = str(peer_id_of(entry(1).node_key))
    assert parse_dnsaddr(f"dnsaddr=/ip4/10.0.0.1/tcp/5/p2p/{pid}") == ("addr", "/ip4/10.0.0.1/tcp/5", pid)
    assert parse_dnsaddr("dnsaddr=/dnsaddr/other.example") == ("dnsaddr", "other.example", None)
    for bad in ("v=spf1", "dnsaddr=/ip4/10.0.0.1/tcp/5", "dnsaddr=/nonsense/1", "dnsaddr=" + "/ip4/1.2.3.4" * 60):
        with pytest.raises(DnsRecordMalformed):
            parse_dnsaddr(bad)


def test_parse_index_caps_and_drops_bad_labels():
    assert parse_index([b"n-1 n-2 BAD_ n-2", b"n-3 n-4"], max_nodes=3) == ["n-1", "n-2", "n-3"]


def test_parse_server():
    assert parse_server("127.0.0.1:5353") == ("127.0.0.1", 5353)
    assert parse_server("ns.example") == ("ns.example", 53)
    with pytest.raises(DnsRecordMalformed):
        parse_server("host:notaport")


def test_confirm_needs_peer_id_address_role_and_eligibility():
    miner, gone = entry(1), entry(2, eligible=False)
    registry = view(miner, gone)
    pid, gone_pid = str(peer_id_of(miner.node_key)), str(peer_id_of(gone.node_key))
    stranger = str(peer_id_of(entry(9).node_key))
    good = DnsHint("n-01010101", pid, "/ip4/127.0.0.1/tcp/4001", "miner")
    hints = [good, good,
             DnsHint("x", pid, "/ip4/6.6.6.6/tcp/4001"),
             DnsHint("x", pid, "/ip4/127.0.0.1/tcp/4001", "validator"),
             DnsHint("x", stranger, "/ip4/127.0.0.1/tcp/4009"),
             DnsHint("x", gone_pid, "/ip4/127.0.0.1/tcp/4002"),
             DnsHint("x", "not-a-peer-id", "/ip4/127.0.0.1/tcp/4001")]
    confirmed, ignored = confirm(hints, registry)
    assert confirmed == [good]
    assert [i.reason for i in ignored] == ["address_mismatch", "role_mismatch", "unregistered",
                                           "not_eligible", "bad_peer_id"]


def test_bad_discover_server_is_one_error_line_before_anything_runs(tmp_path):
    from tests.conftest import run_cli

    result = run_cli("miner", "--rpc", "http://127.0.0.1:1", "--deployment", str(tmp_path / "none.json"),
                     "--keys", str(tmp_path / "keys"), "--data-dir", str(tmp_path / "data"),
                     "--discover", "example.org", "--discover-server", "host:bad", "--log-format", "text")
    assert result.code == 1 and result.stderr.strip().endswith("is not HOST:PORT")
    assert not (tmp_path / "data").exists()
