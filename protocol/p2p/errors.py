"""Typed p2p errors. Each says when it is raised; all derive from `P2PError`.

`MalformedMessage` and `MessageRejected` are re-exported from protocol.messages. The blob
protocol maps the refusals (`PeerRefused`, `RateLimited`, `BlobNotFound`, ...) to a
status byte on the wire, so a client gets the same typed error the server decided on.
"""

from __future__ import annotations

from libp2p.security.exceptions import HandshakeFailure

from protocol.core.errors import VeritrainError

# Message errors live next to the pydantic models (protocol/core/wire/messages.py imports no libp2p);
# re-exported so p2p callers find every error they can see here.
from protocol.core.wire.messages import MalformedMessage, MessageRejected

__all__ = ["MalformedMessage", "MessageRejected"]


class P2PError(VeritrainError):
    """Base of every error raised by protocol.p2p."""


class FrameTooLarge(P2PError):
    """Raised when a request, header, chunk or whole blob exceeds its configured size cap."""


class BlobHashMismatch(P2PError):
    """Raised when received bytes do not hash (blake3) to the content hash that was asked for."""


class TruncatedStream(P2PError):
    """Raised when a peer closes or resets a stream before sending the bytes it announced."""


class TransferTimeout(P2PError):
    """Raised when a read, dial or whole transfer does not finish within its deadline."""


class PeerUnavailable(P2PError):
    """Raised when a peer cannot be dialled or no connection/stream to it can be opened."""


class PeerRefused(P2PError):
    """Raised when the remote refuses us because our node key is not in its registry view
    (and server-side when an unregistered peer asks for anything)."""


class PeerNotAdmitted(PeerRefused, HandshakeFailure):
    """Raised by our Noise transport right after the handshake when the remote's node key is
    not bound to an account eligible in its role (docs/INTEROP.md §2a): the connection is
    closed before any muxer, stream or gossip runs on it. Also a `HandshakeFailure`, so
    py-libp2p's swarm treats it as a failed security upgrade and drops the raw connection."""


class RateLimited(P2PError):
    """Raised when a peer is over its request, byte or concurrency budget."""


class BlobNotFound(P2PError):
    """Raised when the remote does not hold the requested blob or checkpoint."""


class RemoteError(P2PError):
    """Raised when the remote answers with a status we do not know or a bad-request status."""


class AllPeersFailed(P2PError):
    """Raised by multi-peer fetches when every candidate peer failed; `errors` maps each
    peer (as a string) to the typed error it gave."""

    def __init__(self, errors: dict[str, P2PError]) -> None:
        detail = "; ".join(f"{peer}: {type(err).__name__}: {err}" for peer, err in errors.items())
        super().__init__(f"all peers failed: {detail}")
        self.errors = errors


class RegistryError(P2PError):
    """Raised when a registry entry is rejected: bad binding signature, key already bound to
    another account, or malformed fields."""


class DnsAidError(P2PError):
    """Base of the DNS-AID discovery errors (protocol/p2p/dns_*.py); DNS only gives hints,
    so a node that catches one logs it and carries on with the registry alone."""


class DnsRecordMalformed(DnsAidError):
    """Raised when a DNS-AID SVCB, index or `dnsaddr` TXT record cannot be parsed (bad label,
    missing or oversized key, a multiaddr that does not parse or lacks its /p2p part)."""


class DnsLookupFailed(DnsAidError):
    """Raised when the index of a domain cannot be resolved (no answer, timeout, server failure)."""


class DnsBudgetExceeded(DnsAidError):
    """Raised when discovery of one domain runs past its total time budget."""
