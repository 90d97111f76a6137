"""Discovery by DNS-AID: read a domain's index, each node's SVCB and `dnsaddr` TXT records
(dnspython), and return the (peer id, address) hints they claim. Nothing here is trusted:
`dns_confirm.confirm` checks every hint against the on-chain registry before anyone dials.

Every query has a timeout and the whole walk a time budget; record counts, node counts,
value lengths and `/dnsaddr/` recursion are capped (dns_aid.py). A malformed or missing
node record is reported in `Discovery.problems` and the walk goes on; only an index that
cannot be read fails the whole lookup (DnsLookupFailed).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field

import dns.exception
import dns.rdatatype
import dns.resolver
import multiaddr.exceptions

from protocol.p2p.dns_aid import (
    DNSADDR_PREFIX,
    KEY_ROLE,
    MAX_DNSADDR_DEPTH,
    MAX_NODES,
    MAX_RECORDS_PER_NAME,
    MAX_VALUE_CHARS,
    DnsHint,
    dnsaddr_name,
    index_name,
    is_label,
    svcb_name,
)
from protocol.p2p.errors import DnsAidError, DnsBudgetExceeded, DnsLookupFailed, DnsRecordMalformed
from protocol.p2p.host import split_multiaddr


@dataclass(frozen=True)
class DiscoveryConfig:
    server: tuple[str, int] | None = None  # (host, port) of the name server; None: the system's
    timeout_s: float = 2.0  # per query, UDP then TCP on truncation
    budget_s: float = 10.0  # the whole walk of one domain
    max_records: int = MAX_RECORDS_PER_NAME
    max_nodes: int = MAX_NODES
    max_depth: int = MAX_DNSADDR_DEPTH


@dataclass
class Discovery:
    hints: list[DnsHint] = field(default_factory=list)
    problems: list[tuple[str, DnsAidError]] = field(default_factory=list)  # (label, why)


def parse_server(text: str) -> tuple[str, int]:
    """'HOST:PORT' (or 'HOST', port 53) -> (host, port); DnsRecordMalformed when it is not."""
    host, _, port = text.rpartition(":") if ":" in text else (text, "", "53")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise DnsRecordMalformed(f"name server {text!r} is not HOST:PORT")
    return host.strip("[]"), int(port)


def discover(domain: str, config: DiscoveryConfig) -> Discovery:
    """Walk `domain`'s DNS-AID records; blocking (call it off the trio thread)."""
    lookup = _Lookup(config)
    out = Discovery()
    index = lookup.txt(index_name(domain), joined=False)  # one label per character-string
    for label in parse_index(index, config.max_nodes):
        try:
            out.hints += _node_hints(lookup, label, domain)
        except DnsBudgetExceeded as exc:
            out.problems.append((label, exc))
            break
        except DnsAidError as exc:
            out.problems.append((label, exc))
    return out


def parse_index(records: Iterable[bytes], max_nodes: int) -> list[str]:
    """Node labels of the index TXT strings, first `max_nodes` distinct valid ones."""
    labels: list[str] = []
    for raw in records:
        for text in raw.decode("ascii", "replace").split():
            if is_label(text) and text not in labels and len(labels) < max_nodes:
                labels.append(text)
    return labels


def parse_dnsaddr(value: str) -> tuple[str, str, str | None]:
    """A `dnsaddr=` value -> ("addr", transport multiaddr, peer id) or ("dnsaddr", host,
    peer id filter or None). DnsRecordMalformed for anything else."""
    if not value.startswith(DNSADDR_PREFIX) or len(value) > MAX_VALUE_CHARS:
        raise DnsRecordMalformed(f"not a dnsaddr value: {value[:80]!r}")
    addr = value[len(DNSADDR_PREFIX):]
    try:
        ma, pid = split_multiaddr(addr)
    except (ValueError, multiaddr.exceptions.Error) as exc:
        raise DnsRecordMalformed(f"bad multiaddr {addr[:80]!r}: {exc}") from exc
    parts = str(ma).split("/")
    if len(parts) == 3 and parts[1] == "dnsaddr":
        return "dnsaddr", parts[2], None if pid is None else str(pid)
    if pid is None:
        raise DnsRecordMalformed(f"multiaddr {addr[:80]!r} has no /p2p/<peer id>")
    return "addr", str(ma), str(pid)


def _node_hints(lookup: _Lookup, label: str, domain: str) -> list[DnsHint]:
    role = _role(lookup, svcb_name(label, domain))
    pairs = _dnsaddrs(lookup, dnsaddr_name(label, domain), None, 0)
    return [DnsHint(label, pid, addr, role) for addr, pid in pairs]


def _role(lookup: _Lookup, name: str) -> str | None:
    """key65280 of the first SVCB record at `name`; None when there is none."""
    for rdata in lookup.svcb(name):
        for key, param in getattr(rdata, "params", {}).items():
            if int(key) == KEY_ROLE:
                value = bytes(getattr(param, "value", b"") or b"")
                if value not in (b"miner", b"validator"):
                    raise DnsRecordMalformed(f"{name} key{KEY_ROLE}={value[:20]!r} is no role")
                return value.decode()
        return None
    return None


def _dnsaddrs(lookup: _Lookup, name: str, want: str | None, depth: int) -> list[tuple[str, str]]:
    """(transport addr, peer id) pairs at `name`, following /dnsaddr/ up to max_depth."""
    out: list[tuple[str, str]] = []
    for raw in lookup.txt(name):
        kind, target, pid = parse_dnsaddr(raw.decode("ascii", "replace"))
        if kind == "addr":
            if want is None or pid == want:  # the spec's /p2p suffix filter
                out.append((target, str(pid)))
        elif depth + 1 > lookup.config.max_depth:
            raise DnsRecordMalformed(f"{name}: /dnsaddr/ nested deeper than {lookup.config.max_depth}")
        else:
            out += _dnsaddrs(lookup, f"_dnsaddr.{target.rstrip('.')}.", pid or want, depth + 1)
    return out[: lookup.config.max_records]


class _Lookup:
    """One resolver, the walk's deadline and the per-name record cap."""

    def __init__(self, config: DiscoveryConfig) -> None:
        self.config = config
        self.deadline = time.monotonic() + config.budget_s
        if config.server is None:
            self.resolver = dns.resolver.Resolver()
        else:
            self.resolver = dns.resolver.Resolver(configure=False)
            self.resolver.nameservers = [config.server[0]]
            self.resolver.port = config.server[1]
        self.resolver.use_edns(0, 0, 1232)  # the DNS flag day size; larger answers go TCP

    def txt(self, name: str, joined: bool = True) -> list[bytes]:
        """Each TXT record's strings joined (a dnsaddr value may be split), or each string
        on its own; at most max_records records, sorted so the cut does not depend on the
        server's order."""
        rows = sorted(tuple(r.strings) for r in self._query(name, dns.rdatatype.TXT))[: self.config.max_records]
        return [b"".join(row) for row in rows] if joined else [s for row in rows for s in row]

    def svcb(self, name: str) -> list[dns.rdata.Rdata]:
        records = self._query(name, dns.rdatatype.SVCB, missing_ok=True)
        return sorted(records, key=lambda r: r.priority)[: self.config.max_records]

    def _query(self, name: str, rdtype: dns.rdatatype.RdataType, missing_ok: bool = False) -> list:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise DnsBudgetExceeded(f"DNS budget of {self.config.budget_s}s spent before {name}")
        try:
            answer = self.resolver.resolve(name, rdtype, lifetime=min(self.config.timeout_s, left),
                                           search=False, raise_on_no_answer=not missing_ok)
        except (dns.resolver.NXDOMAIN, dns.resolver.NoAnswer) as exc:
            if missing_ok:
                return []
            raise DnsLookupFailed(f"{name} {rdtype.name}: no such record") from exc
        except dns.exception.DNSException as exc:
            raise DnsLookupFailed(f"{name} {rdtype.name}: {type(exc).__name__}: {exc}") from exc
        return list(answer.rrset or [])
