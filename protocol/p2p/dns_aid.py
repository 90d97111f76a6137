"""DNS-AID names, keys and caps: the one place the record layout is spelled out.

Layout (docs/INTEROP.md "Discovery by DNS-AID"; draft-mozleywilliams-dnsop-dnsaid):

    _index._agents.<domain>               TXT   one string per node label
    _<label>._libp2p._agents.<domain>     SVCB  1 . port=.. ipv4hint=.. key65280=.. ...
    _dnsaddr.<label>.<domain>             TXT   "dnsaddr=/ip4/../tcp/../p2p/<peer id>"

The draft defines the `_agents` leaf and `_<name>._<protocol>` owner names but no capability
keys and no way to list a domain's agents, so the role, hardware class and throughput go in
private-use SvcParamKeys (RFC 9460 §14.3.2: 65280-65534) and the index is our own TXT record.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

AGENTS = "_agents"  # the draft's well-known leaf label
PROTOCOL = "_libp2p"  # the <protocol> label: peers speak libp2p (Noise + yamux over TCP)
INDEX = "_index"  # our listing: DNS has no way to enumerate names
DNSADDR_PREFIX = "dnsaddr="  # the libp2p dnsaddr TXT convention

# private-use SvcParamKeys; values are ASCII strings
KEY_ROLE = 65280  # "miner" | "validator"
KEY_CLASS = 65281  # hardware class id, 64 lowercase hex digits (replay_profile.class_id)
KEY_THROUGHPUT = 65282  # tokens/s, decimal integer; "0" when unknown

SVCB_PRIORITY = 1  # ServiceMode; one endpoint per node, so its value does not matter

# caps: DNS is a hint from whoever runs the zone, so nothing it says may cost us much
MAX_RECORDS_PER_NAME = 64  # TXT / SVCB records read at one owner name; the rest are cut
MAX_NODES = 256  # labels read from the index
MAX_DNSADDR_DEPTH = 2  # /dnsaddr/ indirections followed (the libp2p spec asks for a limit)
MAX_VALUE_CHARS = 512  # longest multiaddr or key value accepted

_LABEL = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$")


@dataclass(frozen=True)
class DnsHint:
    """One (peer, address) pair some DNS zone claims; nothing is trusted until the registry
    confirms it (dns_confirm.confirm)."""

    label: str  # the node label it was found under
    peer_id: str  # base58 libp2p peer id from the /p2p part
    addr: str  # transport multiaddr without /p2p, e.g. /ip4/127.0.0.1/tcp/4001
    role: str | None = None  # key65280 of the node's SVCB record, when there is one


def node_label(account: bytes) -> str:
    """`n-` and the first 8 hex digits of the account: short, stable across restarts and key
    changes, and a valid DNS label. (Two accounts sharing 32 bits would share a label; the
    zone builder refuses that rather than publish one over the other.)"""
    if len(account) != 20:
        raise ValueError("account must be 20 bytes")
    return f"n-{account[:4].hex()}"


def is_label(text: str) -> bool:
    return bool(_LABEL.match(text))


def index_name(domain: str) -> str:
    return f"{INDEX}.{AGENTS}.{_fqdn(domain)}"


def svcb_name(label: str, domain: str) -> str:
    return f"_{label}.{PROTOCOL}.{AGENTS}.{_fqdn(domain)}"


def dnsaddr_name(label: str, domain: str) -> str:
    return f"_dnsaddr.{label}.{_fqdn(domain)}"


def _fqdn(domain: str) -> str:
    return domain.rstrip(".") + "."
