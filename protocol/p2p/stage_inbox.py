"""The receiving end of the stage link (stage_link.py, docs/INTEROP.md §5a).

A stage registers what it expects: per lane (round, pipeline, sender's stage, direction) the
neighbour's node key, the tensor shape (`boundary_tensor.boundary_shape` of the model config and
microbatch rows; its byte count is the cap) and how many steps and microbatches. A tensor is kept
only when it comes from that neighbour, for a slot in range, of exactly that shape, signed by the
neighbour for its slot and hash, with bytes that hash to it; every other stream gets a typed
refusal, logged, and the inbox keeps serving. The stage `await`s a slot with a timeout, and a
timeout names the slot and the silent neighbour (`StageSilent`). The signed hashes are kept as
evidence (DESIGN.md §8.4) after the tensors are released.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Sequence
from dataclasses import dataclass

import trio
from libp2p.abc import IHost, INetStream

from protocol.core.errors import SignatureError
from protocol.core.pipeline.boundary import Direction, Signed, Slot, verify_boundary
from protocol.core.wire.boundary_tensor import (
    MAX_HEADER_BYTES,
    BoundaryHeader,
    boundary_hash,
    decode_header,
    tensor_nbytes,
)
from protocol.core.wire.messages import MalformedMessage
from protocol.p2p import framing
from protocol.p2p.blob_streams import close_quietly, end_refused
from protocol.p2p.config import P2PConfig
from protocol.p2p.errors import (
    FrameTooLarge,
    P2PError,
    PeerRefused,
    RateLimited,
    TransferTimeout,
    TruncatedStream,
)
from protocol.p2p.host import NET_ERRORS
from protocol.p2p.ratelimit import PeerLimiter
from protocol.p2p.registry import RegistryEntry, RegistryView
from protocol.p2p.stage_link import (
    PROTOCOL,
    BoundaryShapeMismatch,
    BoundarySignatureInvalid,
    LinkStatus,
    NotNeighbour,
    SlotFilled,
    StageLinkConfig,
    StageSilent,
    TensorHashMismatch,
    UnexpectedSlot,
    encode_status,
    status_of,
)
from protocol.p2p.traffic import NO_TRAFFIC, CountedStream, Traffic

log = logging.getLogger(__name__)
_WRITE_ERRORS: tuple[type[BaseException], ...] = (P2PError, *NET_ERRORS)  # a write that failed or timed out


@dataclass(frozen=True, order=True)
class Lane:
    """The slots one neighbour sends: all steps and microbatches of (round, pipeline, stage, direction)."""

    round: int
    pipeline: int
    stage: int  # the sender's
    direction: Direction

    @classmethod
    def of(cls, slot: Slot) -> Lane:
        return cls(slot.round, slot.pipeline, slot.stage, slot.direction)


@dataclass(frozen=True)
class Expectation:
    sender: bytes  # the neighbour's ed25519 node key
    shape: tuple[int, ...]  # boundary_shape(model, rows): exactly this, so 4 * prod(shape) is the cap
    steps: int  # steps 1 .. steps
    microbatches: int  # microbatches 0 .. microbatches - 1

    def covers(self, slot: Slot) -> bool:
        return 1 <= slot.step <= self.steps and 0 <= slot.microbatch < self.microbatches


@dataclass(frozen=True)
class Arrived:
    """A kept boundary tensor: its float32 little-endian bytes and its sender's signed hash."""

    slot: Slot
    sender: bytes
    shape: tuple[int, ...]
    data: bytes
    signed: Signed


class StageInbox:
    """The stream handler of the stage link; mount it on the node's host (`mount`)."""

    def __init__(self, config: P2PConfig, registry: RegistryView, limiter: PeerLimiter,
                 link: StageLinkConfig | None = None, traffic: Traffic = NO_TRAFFIC) -> None:
        self.config, self.registry, self.limiter = config, registry, limiter
        self.link = link or StageLinkConfig()
        self.traffic = traffic
        self._lanes: dict[Lane, Expectation] = {}
        self._tensors: dict[Slot, Arrived] = {}
        self._waiting: dict[Slot, trio.Event] = {}
        self.evidence: dict[Slot, tuple[bytes, Signed]] = {}  # slot -> (sender, signed hash), kept
        # the first other verified hash sent for a filled slot: one is the evidence, more is a flood
        self.equivocations: dict[Slot, Signed] = {}
        self.refusals: dict[str, int] = {}  # error class name -> count (tests, metrics)
        self.active = 0

    def mount(self, host: IHost) -> None:
        host.set_stream_handler(PROTOCOL, self.handle)

    def expect(self, lane: Lane, expectation: Expectation) -> None:
        self._lanes[lane] = expectation

    def expect_neighbours(self, round_: int, pipeline: int, stage: int, members: Sequence[bytes],
                          shape: tuple[int, ...], steps: int, microbatches: int) -> None:
        """Stage `stage` of a pipeline whose node keys, stage by stage, are `members`: activations
        from stage - 1, output gradients from stage + 1."""
        if stage > 0:
            self.expect(Lane(round_, pipeline, stage - 1, Direction.FORWARD),
                        Expectation(members[stage - 1], shape, steps, microbatches))
        if stage + 1 < len(members):
            self.expect(Lane(round_, pipeline, stage + 1, Direction.BACKWARD),
                        Expectation(members[stage + 1], shape, steps, microbatches))

    def release(self, slot: Slot) -> None:
        """Drop a used tensor's bytes; its signed hash stays in `evidence`."""
        self._tensors.pop(slot, None)

    def forget_before(self, round_: int) -> None:
        """Everything of the rounds before `round_`: expectations, tensors, evidence (their
        signatures are in the segment bundles the stage wrote when it closed each round)."""
        self._lanes = {k: v for k, v in self._lanes.items() if k.round >= round_}
        self._tensors = {k: v for k, v in self._tensors.items() if k.round >= round_}
        self._waiting = {k: v for k, v in self._waiting.items() if k.round >= round_}
        self.evidence = {k: v for k, v in self.evidence.items() if k.round >= round_}
        self.equivocations = {k: v for k, v in self.equivocations.items() if k.round >= round_}

    async def receive(self, slot: Slot, timeout_s: float) -> Arrived:
        """The tensor of `slot` once it has arrived and checked; StageSilent after `timeout_s`."""
        expectation = self._lanes.get(Lane.of(slot))
        if expectation is None or not expectation.covers(slot):
            raise UnexpectedSlot(f"nobody is expected to send {slot}")
        if (kept := self._tensors.get(slot)) is not None:
            return kept
        if slot in self.evidence:  # it came, and the stage let it go: its sender was not silent
            raise UnexpectedSlot(f"{slot} arrived and was released")
        event = self._waiting.setdefault(slot, trio.Event())
        with trio.move_on_after(timeout_s):
            await event.wait()
        if (kept := self._tensors.get(slot)) is None:
            raise StageSilent(slot, expectation.sender, timeout_s)
        return kept

    async def handle(self, stream: INetStream) -> None:
        stream = CountedStream(stream, PROTOCOL, self.traffic)
        try:
            entry = self._admit(self.registry.admitted_peer(stream.muxed_conn.peer_id))
        except P2PError as exc:
            await self._refuse(stream, exc)
            return
        self.active += 1
        try:
            await self._serve(stream, entry.node_key)
        finally:
            self.active -= 1
            self.limiter.close_stream(entry)

    def _admit(self, entry: RegistryEntry | None) -> RegistryEntry:
        """Before a byte is read: an admitted peer this stage expects something from, in its caps."""
        if entry is None:  # the connection gate let it in, but it lost eligibility since
            raise PeerRefused("node key not bound to an eligible account")
        if not any(e.sender == entry.node_key for e in self._lanes.values()):
            raise NotNeighbour("this stage expects no tensor from that node key")
        if self.active >= self.link.max_streams:
            self.traffic.rate_limited("busy")
            raise RateLimited("stage link at stream capacity")
        if not self.limiter.open_stream(entry):  # shared with the blob protocol: per-peer streams
            raise RateLimited("too many concurrent streams")
        return entry

    async def _serve(self, stream: INetStream, sender: bytes) -> None:
        try:
            with trio.fail_after(self.link.transfer_timeout_s):
                reader = framing.StreamReader(stream, self.config.read_timeout_s)
                header = await self._read_header(reader, sender)
                if self._settled(header, sender):
                    await self._answer_ok(stream)
                    return
                data = await self._read_payload(reader, header)
            self._keep(header, sender, data)
            await self._answer_ok(stream)
        except (P2PError, MalformedMessage) as exc:
            await self._refuse(stream, exc)
        except trio.TooSlowError:  # a dripping sender: no answer, as for a silent one
            await self._drop(stream, TransferTimeout(f"tensor not read within {self.link.transfer_timeout_s} s"))
        except NET_ERRORS as exc:
            await self._drop(stream, exc)

    async def _read_header(self, reader: framing.StreamReader, sender: bytes) -> BoundaryHeader:
        """The header, checked in the order that costs least: sender, slot, cap, shape, signature."""
        (length,) = struct.unpack(">I", await reader.exactly(4))
        if length > MAX_HEADER_BYTES:
            raise FrameTooLarge(f"header of {length} bytes > {MAX_HEADER_BYTES}")
        header = decode_header(await reader.exactly(length))
        slot = header.slot
        expectation = self._lanes.get(Lane.of(slot))
        if expectation is None or expectation.sender != sender:
            raise NotNeighbour(f"the sender is not the expected neighbour for {slot}")
        if not expectation.covers(slot):
            raise UnexpectedSlot(f"{slot} is outside its lane's {expectation.steps} steps "
                                 f"x {expectation.microbatches} microbatches")
        cap = tensor_nbytes(expectation.shape)
        if header.nbytes > cap:
            raise FrameTooLarge(f"tensor of {header.nbytes} bytes > the lane's cap of {cap}")
        if header.shape != expectation.shape:
            raise BoundaryShapeMismatch(f"shape {header.shape} is not the expected {expectation.shape}")
        self._verify(header, sender)
        return header

    def _verify(self, header: BoundaryHeader, sender: bytes) -> None:
        signed = header.signed
        try:
            verify_boundary(sender, signed.signature, self.config.chain_id, self.config.contract,
                            header.slot, signed.tensor_hash)
        except SignatureError as exc:
            raise BoundarySignatureInvalid(f"not the neighbour's signature for {header.slot}: {exc}") from exc

    def _settled(self, header: BoundaryHeader, sender: bytes) -> bool:
        """True when the slot already holds this signed hash (a resend after a lost answer);
        SlotFilled, with the second hash kept as evidence, when it holds another."""
        held = self.evidence.get(header.slot)
        if held is None:
            return False
        if held[1].tensor_hash == header.signed.tensor_hash:
            return True
        self.equivocations.setdefault(header.slot, header.signed)
        raise SlotFilled(f"{header.slot} already holds another tensor from this sender")

    async def _read_payload(self, reader: framing.StreamReader, header: BoundaryHeader) -> bytes:
        buf = bytearray(header.nbytes)  # allocated only now: the cap and shape were checked
        view, got = memoryview(buf), 0
        while got < len(buf):
            part = await reader.some(len(buf) - got)
            view[got: got + len(part)] = part
            got += len(part)
        if boundary_hash(view) != header.signed.tensor_hash:
            raise TensorHashMismatch(f"the bytes of {header.slot} do not hash to the signed hash")
        return bytes(buf)

    def _keep(self, header: BoundaryHeader, sender: bytes, data: bytes) -> None:
        slot = header.slot
        if (held := self.evidence.get(slot)) is not None and held[1] != header.signed:
            self.equivocations.setdefault(slot, header.signed)  # raced in on two streams
            raise SlotFilled(f"{slot} already holds another tensor from this sender")
        self.evidence[slot] = (sender, header.signed)
        self._tensors[slot] = Arrived(slot, sender, header.shape, data, header.signed)
        if (event := self._waiting.pop(slot, None)) is not None:
            event.set()

    async def _answer_ok(self, stream: INetStream) -> None:
        try:
            await framing.write_within(stream, encode_status(LinkStatus.OK, ""), self.config.read_timeout_s)
        except _WRITE_ERRORS as exc:  # kept all the same: the sender signed it
            log.info("stage link: answer to %s lost: %r", stream.muxed_conn.peer_id, exc)
        await close_quietly(stream, self.config.close_timeout_s)

    def _count(self, stream: INetStream, exc: BaseException) -> None:
        name = type(exc).__name__
        self.refusals[name] = self.refusals.get(name, 0) + 1
        log.info("stage link: refused %s: %r", stream.muxed_conn.peer_id, exc)

    async def _refuse(self, stream: INetStream, exc: Exception) -> None:
        """A typed refusal: its status and reason, then the stream ended (blob_streams.end_refused)."""
        self._count(stream, exc)
        if isinstance(exc, TransferTimeout | TruncatedStream):
            await close_quietly(stream, self.config.close_timeout_s, reset=True)  # nobody to answer
            return
        try:
            await framing.write_within(stream, encode_status(status_of(exc), str(exc)), self.config.read_timeout_s)
        except _WRITE_ERRORS:
            pass
        await end_refused(stream, self.config.close_timeout_s)

    async def _drop(self, stream: INetStream, exc: BaseException) -> None:
        self._count(stream, exc)
        await close_quietly(stream, self.config.close_timeout_s, reset=True)
