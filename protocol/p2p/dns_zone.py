"""The DNS-AID zone fragment for a registry: pure text, no I/O (`veritrain dns-aid records`
prints it; the operator pastes it into the zone of their domain)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import multiaddr
import multiaddr.exceptions

from protocol.p2p.dns_aid import (
    DNSADDR_PREFIX,
    KEY_CLASS,
    KEY_ROLE,
    KEY_THROUGHPUT,
    SVCB_PRIORITY,
    dnsaddr_name,
    index_name,
    node_label,
    svcb_name,
)
from protocol.p2p.host import split_multiaddr
from protocol.p2p.registry import RegistryEntry, peer_id_of

TTL = 300  # seconds: registrations change rarely, and a stale hint only costs a failed dial


def zone_fragment(entries: Iterable[RegistryEntry], domain: str, class_id: bytes,
                  throughput: Mapping[bytes, int] | None = None, classes: Mapping[bytes, bytes] | None = None) -> str:
    """Index TXT, one SVCB and one dnsaddr TXT per eligible entry, sorted by label.
    `throughput` maps an account to tokens/s (0 when absent), `classes` to the id of the
    hardware class it registered (`class_id` when absent). Entries that cannot be
    published (not eligible, unparsable multiaddr, label collision) become comments."""
    lines = [f"; DNS-AID records for {domain} (veritrain dns-aid records)"]
    labels: list[str] = []
    seen: set[str] = set()
    for entry in sorted(entries, key=lambda e: node_label(e.account)):
        label = node_label(entry.account)
        reason = _unpublishable(entry, label, seen)
        if reason:
            lines.append(f"; skipped {label}: {reason}")
            continue
        seen.add(label)
        labels.append(label)
        tps = (throughput or {}).get(entry.account, 0)
        lines += _node_records(entry, label, domain, (classes or {}).get(entry.account, class_id), tps)
    if labels:
        lines.insert(1, f"{index_name(domain)} {TTL} IN TXT " + " ".join(_quoted(x) for x in labels))
    return "\n".join(lines) + "\n"


def _unpublishable(entry: RegistryEntry, label: str, seen: set[str]) -> str | None:
    if not entry.eligible:
        return "not eligible in its role"
    if label in seen:
        return "label collides with another account's"
    if _transport(entry.multiaddr) is None:
        return f"registered multiaddr {entry.multiaddr!r} is not /ip4|ip6/../tcp/.."
    return None


def _node_records(entry: RegistryEntry, label: str, domain: str, class_id: bytes, tps: int) -> list[str]:
    ip_key, ip, port = _transport(entry.multiaddr) or ("", "", 0)
    params = [f"port={port}", f"{ip_key}={ip}", f'key{KEY_ROLE}="{entry.role}"',
              f'key{KEY_CLASS}="{class_id.hex()}"', f'key{KEY_THROUGHPUT}="{max(0, int(tps))}"']
    addr = f"{split_multiaddr(entry.multiaddr)[0]}/p2p/{peer_id_of(entry.node_key)}"
    return [f"{svcb_name(label, domain)} {TTL} IN SVCB {SVCB_PRIORITY} . " + " ".join(params),
            f"{dnsaddr_name(label, domain)} {TTL} IN TXT {_quoted(DNSADDR_PREFIX + addr)}"]


def _transport(addr: str) -> tuple[str, str, int] | None:
    """(svcb hint key, ip, tcp port) of an /ip4|ip6/X/tcp/N multiaddr, else None."""
    try:
        ma, _ = split_multiaddr(addr)
        parts = [(p.name, ma.value_for_protocol(p.code)) for p in ma.protocols()]
    except (ValueError, multiaddr.exceptions.Error):
        return None
    if len(parts) != 2 or parts[0][0] not in ("ip4", "ip6") or parts[1][0] != "tcp":
        return None
    hint = "ipv4hint" if parts[0][0] == "ip4" else "ipv6hint"
    return hint, str(parts[0][1]), int(parts[1][1])


def _quoted(text: str) -> str:
    # labels and multiaddrs hold no quotes or backslashes; escape anyway, the zone is parsed
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
