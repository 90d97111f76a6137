"""The registry check of DNS hints: DNS says where a peer might be, the chain says who it
is. A hint is dialled only if its peer id belongs to an eligible registered node key, its
address is that entry's registered multiaddr, and its role (when the SVCB record gives one)
is the registered role. Pure: no I/O."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import multiaddr.exceptions
from libp2p.peer.id import ID

from protocol.p2p.dns_aid import DnsHint
from protocol.p2p.host import split_multiaddr
from protocol.p2p.registry import RegistryView


@dataclass(frozen=True)
class Ignored:
    hint: DnsHint
    reason: str  # bad_peer_id | unregistered | not_eligible | address_mismatch | role_mismatch


def confirm(hints: Iterable[DnsHint], registry: RegistryView) -> tuple[list[DnsHint], list[Ignored]]:
    """(hints the registry confirms, de-duplicated; the others with why)."""
    confirmed: list[DnsHint] = []
    ignored: list[Ignored] = []
    for hint in hints:
        reason = _reason(hint, registry)
        if reason is not None:
            ignored.append(Ignored(hint, reason))
        elif (hint.peer_id, hint.addr) not in {(h.peer_id, h.addr) for h in confirmed}:
            confirmed.append(hint)
    return confirmed, ignored


def _reason(hint: DnsHint, registry: RegistryView) -> str | None:
    try:
        peer = ID.from_base58(hint.peer_id)
    except (ValueError, TypeError):
        return "bad_peer_id"
    entry = registry.lookup_by_peer_id(peer)
    if entry is None:
        return "unregistered"
    if not entry.eligible:
        return "not_eligible"
    registered = _transport(entry.multiaddr)
    if registered is None or registered != _transport(hint.addr):
        return "address_mismatch"
    if hint.role is not None and hint.role != entry.role:
        return "role_mismatch"
    return None


def _transport(addr: str) -> str | None:
    """The canonical text of a multiaddr less any /p2p part (None if it does not parse)."""
    try:
        return str(split_multiaddr(addr)[0])
    except (ValueError, multiaddr.exceptions.Error):
        return None
