"""Read-ahead under Noise: fewer recv syscalls per encrypted message.

py-libp2p's Noise reader asks the raw TCP connection for each message's 2-byte length, then
for its (up to 65535-byte) body, and `TrioTCPStream.read` maps every such call to one
`recv`: two or more syscalls and trio I/O waits per 64 KiB message, on both ends of a bulk
transfer. Profiling a 50 MB blob fetch put a quarter of the client's CPU in those calls.

`BufferedNoiseTransport` is a plain `NoiseTransport` (passed through `new_host(sec_opt=...)`,
py-libp2p's public hook for security transports) that runs the stock Noise handshake over a
`ReadAheadConnection` (the same raw connection, but reads fetch up to `READ_AHEAD` bytes at
once and later reads are served from that buffer) and turns the session it returns into a
`FastNoiseSession` on that same connection (noise_session.py: same wire, far fewer copies).
Bytes, order and errors are unchanged; writes go straight through. Nothing in py-libp2p is
patched.

It is also the connection gate (docs/INTEROP.md §2a): right after the handshake, which
authenticates the remote's identity key, `admit(peer_id)` decides; a peer whose node key is
not bound to an eligible account gets its raw connection closed and `PeerNotAdmitted`
raised, so no muxer, stream, identify or pubsub ever runs on it (it never joins the mesh and
nothing is forwarded to it). Both directions are gated: we never keep a connection we dialled
to a peer that is not admitted either.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import trio
from libp2p.abc import IRawConnection, ISecureConn
from libp2p.connection_types import ConnectionType
from libp2p.exceptions import BaseLibp2pError
from libp2p.peer.id import ID
from libp2p.security.noise.transport import Transport as NoiseTransport
from libp2p.security.secure_session import SecureSession
from multiaddr import Multiaddr

from protocol.p2p.errors import PeerNotAdmitted
from protocol.p2p.noise_session import FastNoiseSession

log = logging.getLogger(__name__)

READ_AHEAD = 256 * 1024  # one recv; ~4 full Noise messages, well under loopback's socket buffer


class ReadAheadConnection(IRawConnection):
    """An `IRawConnection` that reads ahead from another one; used only by one reader (Noise)."""

    def __init__(self, conn: IRawConnection, read_ahead: int = READ_AHEAD) -> None:
        self.conn = conn
        self.is_initiator = conn.is_initiator
        self.read_ahead = read_ahead
        self._buf = b""
        self._pos = 0

    async def read(self, n: int | None = None) -> bytes:
        if n == 0:
            return b""
        if self._pos == len(self._buf):
            data = await self.conn.read(max(self.read_ahead, n or 0))
            if n is None or len(data) <= n:
                return data  # the common small-message case: no copy, nothing kept
            self._buf, self._pos = data, 0
        end = len(self._buf) if n is None else min(len(self._buf), self._pos + n)
        out = self._buf[self._pos : end]
        self._pos = end
        if self._pos == len(self._buf):
            self._buf, self._pos = b"", 0
        return out

    async def write(self, data: bytes) -> None:
        await self.conn.write(data)

    async def close(self) -> None:
        await self.conn.close()

    def get_remote_address(self) -> tuple[str, int] | None:
        return self.conn.get_remote_address()

    def get_transport_addresses(self) -> list[Multiaddr]:
        return self.conn.get_transport_addresses()

    def get_connection_type(self) -> ConnectionType:
        return self.conn.get_connection_type()

    def __getattr__(self, name: str) -> Any:  # optional extras (e.g. conn_state) pass through
        if name == "conn":
            raise AttributeError(name)
        return getattr(self.conn, name)


class BufferedNoiseTransport(NoiseTransport):
    """Noise whose handshake reads through a `ReadAheadConnection`, whose sessions are
    `FastNoiseSession`s on that same connection (noise_session.py), and which admits only
    peers for which `admit(peer_id)` is true (see the module docstring)."""

    def __init__(self, *args: Any, admit: Callable[[ID], bool], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.admit = admit
        self.refused = 0  # connections dropped at the gate, for tests and metrics

    async def secure_inbound(self, conn: IRawConnection) -> ISecureConn:
        raw = ReadAheadConnection(conn)
        return await self._gate(_fast(await super().secure_inbound(raw), raw))

    async def secure_outbound(self, conn: IRawConnection, peer_id: ID) -> ISecureConn:
        raw = ReadAheadConnection(conn)
        return await self._gate(_fast(await super().secure_outbound(raw, peer_id), raw))

    async def _gate(self, session: ISecureConn) -> ISecureConn:
        peer = session.get_remote_peer()
        if self.admit(peer):
            return session
        self.refused += 1
        log.info("dropping %s after the handshake: node key not bound to an eligible account", peer)
        try:
            await session.close()
        except (OSError, BaseLibp2pError, trio.BrokenResourceError, trio.ClosedResourceError):
            pass  # already gone: the point was to drop it
        raise PeerNotAdmitted(f"{peer} is not bound to an account eligible in its role")


def _fast(session: ISecureConn, raw: IRawConnection) -> ISecureConn:
    if not isinstance(session, SecureSession):
        raise TypeError(f"Noise handshake returned {type(session).__name__}, not a SecureSession")
    return FastNoiseSession(session, raw)
