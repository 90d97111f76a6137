"""The stage link `/veritrain/stage/1.0.0` (docs/INTEROP.md §5a): activations and output
gradients between pipeline stages (DESIGN.md §8.4), and the sending end.

One tensor per stream, on the connection the dialer keeps open:

    sender   := u32 len (<= 1024) || JSON BoundaryHeader || 4 * prod(shape) float32 LE bytes
    receiver := u8 status || u16 len (<= 1024) || UTF-8 reason      (status 0: OK, reason empty)

Why a stream per tensor rather than frames on one kept-open stream: a refused tensor resets
only its own stream, so a bad header can never leave the framing of the next tensor in doubt;
each tensor gets its own status, so the sender knows the receiver kept its signed hash; and a
yamux stream on an open connection costs one multistream round trip, not the 250 ms of a dial
(DESIGN.md §2), against a boundary tensor of hundreds of KB. The receiving end is
stage_inbox.py; the message model is protocol/core/wire/boundary_tensor.py.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum

import multiaddr
import trio
from libp2p.abc import IHost, INetStream
from libp2p.custom_types import TProtocol

from protocol.core.crypto.signing import NodeIdentity
from protocol.core.pipeline.boundary import Signed, Slot, sign_boundary
from protocol.core.wire.boundary_tensor import (
    BoundaryHeader,
    boundary_hash,
    encode_header,
    header_for,
    tensor_nbytes,
)
from protocol.core.wire.messages import MalformedMessage
from protocol.p2p import framing
from protocol.p2p.blob_streams import close_quietly
from protocol.p2p.config import P2PConfig
from protocol.p2p.errors import (
    FrameTooLarge,
    P2PError,
    PeerRefused,
    PeerUnavailable,
    RateLimited,
    RemoteError,
    TransferTimeout,
)
from protocol.p2p.host import NET_ERRORS, Dialer
from protocol.p2p.registry import peer_id_of
from protocol.p2p.traffic import NO_TRAFFIC, CountedStream, Traffic

STAGE_PROTOCOL_ID = "/veritrain/stage/1.0.0"
PROTOCOL = TProtocol(STAGE_PROTOCOL_ID)


@dataclass(frozen=True)
class StageLinkConfig:
    # one tensor, header to status (each read and write also has P2PConfig.read_timeout_s): the
    # tiny model's 524 KB takes milliseconds, so a peer that drips bytes holds a stream 30 s at most
    transfer_timeout_s: float = 30.0
    # stage streams read at once, all peers together: a stage has two neighbours, which send
    # one tensor at a time; more is someone else's flood (each holds up to one tensor's bytes)
    max_streams: int = 8


class StageLinkError(P2PError):
    """Base of the stage link's refusals that have no general p2p error."""


class NotNeighbour(StageLinkError, PeerRefused):
    """Raised when a tensor comes from a peer that is not the expected neighbour for its
    (round, pipeline, stage, direction), or from a peer this stage expects nothing from."""


class UnexpectedSlot(StageLinkError):
    """Raised when a slot's step or microbatch is outside what its lane expects (and, locally,
    when a stage awaits a slot nobody was registered to send)."""


class BoundaryShapeMismatch(StageLinkError):
    """Raised when a header's shape is not the lane's expected (rows, block_size, n_embd)."""


class TensorHashMismatch(StageLinkError):
    """Raised when a tensor's bytes do not hash (blake3) to the hash its sender signed."""


class BoundarySignatureInvalid(StageLinkError):
    """Raised when a header's signature is not the expected neighbour's over its slot and hash."""


class SlotFilled(StageLinkError):
    """Raised when a slot already holds a different tensor (the second signed hash is kept as
    equivocation evidence when it verifies)."""


class StageSilent(TransferTimeout):
    """Raised when a stage awaits a slot longer than its timeout: names the slot and the
    neighbour that did not send it, so the silent stage can be attributed."""

    def __init__(self, slot: Slot, sender: bytes, timeout_s: float) -> None:
        super().__init__(f"no tensor for {slot} from {sender.hex()[:16]}.. within {timeout_s} s")
        self.slot, self.sender, self.timeout_s = slot, sender, timeout_s


class LinkStatus(IntEnum):
    """The receiver's answer; 0-7 mean what they mean in the blob protocol (framing.Status)."""

    OK = 0
    REFUSED = 2  # the sender is not an admitted peer (it lost eligibility after connecting)
    RATE_LIMITED = 3  # the sender has its per-peer stream cap open
    BAD_REQUEST = 4  # the header does not parse strictly
    TOO_LARGE = 5  # header over 1024 bytes, or tensor over the lane's cap
    BUSY = 6  # the receiver is reading `max_streams` tensors
    INTERNAL = 7  # defined, never sent
    NOT_NEIGHBOUR = 8
    UNEXPECTED_SLOT = 9
    WRONG_SHAPE = 10
    HASH_MISMATCH = 11
    BAD_SIGNATURE = 12
    SLOT_FILLED = 13


# most specific first: a NotNeighbour is also a PeerRefused
_STATUS_OF: tuple[tuple[type[Exception], LinkStatus], ...] = (
    (NotNeighbour, LinkStatus.NOT_NEIGHBOUR),
    (PeerRefused, LinkStatus.REFUSED),
    (RateLimited, LinkStatus.RATE_LIMITED),
    (MalformedMessage, LinkStatus.BAD_REQUEST),
    (FrameTooLarge, LinkStatus.TOO_LARGE),
    (UnexpectedSlot, LinkStatus.UNEXPECTED_SLOT),
    (BoundaryShapeMismatch, LinkStatus.WRONG_SHAPE),
    (TensorHashMismatch, LinkStatus.HASH_MISMATCH),
    (BoundarySignatureInvalid, LinkStatus.BAD_SIGNATURE),
    (SlotFilled, LinkStatus.SLOT_FILLED),
)
_ERROR_OF: dict[int, type[Exception]] = {s: cls for cls, s in _STATUS_OF}


def status_of(exc: Exception) -> LinkStatus:
    return next((s for cls, s in _STATUS_OF if isinstance(exc, cls)), LinkStatus.INTERNAL)


def encode_status(status: LinkStatus, reason: str) -> bytes:
    raw = reason.encode()[: framing.MAX_REASON_BYTES]
    return struct.pack(">BH", status, len(raw)) + raw


async def read_status(reader: framing.StreamReader) -> None:
    """The receiver's answer; the typed error it names unless it is OK."""
    status = (await reader.exactly(1))[0]
    (length,) = struct.unpack(">H", await reader.exactly(2))
    if length > framing.MAX_REASON_BYTES:
        raise FrameTooLarge(f"refusal reason {length} bytes > {framing.MAX_REASON_BYTES}")
    if status == LinkStatus.OK:
        return
    reason = (await reader.exactly(length)).decode(errors="replace")
    name = LinkStatus(status).name if status in LinkStatus._value2member_map_ else str(status)
    raise _ERROR_OF.get(status, RemoteError)(f"receiver answered {name}: {reason}")


class StageSender:
    """Sends boundary tensors to a neighbour stage, signing each tensor's hash for its slot."""

    def __init__(self, host: IHost, dialer: Dialer, identity: NodeIdentity, config: P2PConfig,
                 link: StageLinkConfig | None = None, traffic: Traffic = NO_TRAFFIC) -> None:
        self.host, self.dialer, self.identity, self.config = host, dialer, identity, config
        self.link = link or StageLinkConfig()
        self.traffic = traffic

    async def send(self, receiver: bytes, slot: Slot, data: bytes, shape: tuple[int, ...],
                   addrs: Sequence[multiaddr.Multiaddr] = ()) -> Signed:
        """Send the float32 bytes `data` of a tensor of `shape` for `slot` to the node key
        `receiver`; returns the signed hash the receiver now keeps. Raises the typed error of
        the receiver's refusal, or TransferTimeout / PeerUnavailable / TruncatedStream."""
        if len(data) != tensor_nbytes(shape):
            raise ValueError(f"{len(data)} bytes are not a float32 tensor of shape {shape}")
        digest = boundary_hash(data)
        signature = sign_boundary(self.identity, self.config.chain_id, self.config.contract, slot, digest)
        await self.push(receiver, header_for(slot, shape, digest, signature), data, addrs)
        return Signed(digest, signature)

    async def push(self, receiver: bytes, header: BoundaryHeader, data: bytes | memoryview,
                   addrs: Sequence[multiaddr.Multiaddr] = ()) -> None:
        """One frame as given (no check that `data` matches `header`), and the receiver's answer."""
        stream = await self._open(receiver, addrs)
        ok = False
        try:
            with trio.fail_after(self.link.transfer_timeout_s):
                await self._exchange(stream, encode_header(header), memoryview(data))
            ok = True
        except trio.TooSlowError as exc:
            raise TransferTimeout(f"tensor for {header.slot} not taken within "
                                  f"{self.link.transfer_timeout_s} s") from exc
        finally:
            await close_quietly(stream, self.config.close_timeout_s, reset=not ok)

    async def _exchange(self, stream: INetStream, head: bytes, data: memoryview) -> None:
        try:
            await framing.write_within(stream, head, self.config.read_timeout_s)
            for off in range(0, len(data), framing.WRITE_SIZE):
                await framing.write_within(stream, bytes(data[off: off + framing.WRITE_SIZE]),
                                           self.config.read_timeout_s)
        except NET_ERRORS:
            pass  # a receiver that refused early may have reset: its status may still be readable
        await read_status(framing.StreamReader(stream, self.config.read_timeout_s))

    async def _open(self, receiver: bytes, addrs: Sequence[multiaddr.Multiaddr]) -> INetStream:
        peer_id = peer_id_of(receiver)
        await self.dialer.connect(peer_id, addrs)  # reuses the open connection
        try:
            with trio.fail_after(self.config.dial_timeout_s):
                return CountedStream(await self.host.new_stream(peer_id, [PROTOCOL]), PROTOCOL, self.traffic)
        except trio.TooSlowError as exc:
            raise TransferTimeout(f"opening a stage stream to {peer_id} timed out") from exc
        except NET_ERRORS as exc:
            raise PeerUnavailable(f"cannot open a stage stream to {peer_id}: {exc}") from exc
