"""Blob protocol: serve and fetch blobs by content hash, and checkpoints with Merkle proofs.

Server: only admitted peers (eligible registry entries) are served; each peer has a request bucket, a byte bucket
(served bytes are paced, not refused) and a concurrent-stream cap; the node has a global
stream cap. Files are sent in chunks, never read whole. Client: each fetch names the cap of
the kind it fetches (protocol/core/wire/blob_caps.py) and a longer announced blob is refused
(FrameTooLarge) before a byte of it is taken; the blake3 hash is computed as the bytes arrive
and checked before any is returned, and a partial download only ever lives in a temp file
(sink.py) that is deleted on failure and renamed into the content-addressed directory on success.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import multiaddr
import trio
from libp2p.abc import IHost, INetStream
from libp2p.custom_types import TProtocol
from libp2p.peer.id import ID

from protocol.core.crypto.hashing import content_hash, content_hasher
from protocol.core.wire.messages import (
    BlobRequest,
    CheckpointRequest,
    MalformedMessage,
    PartName,
    from_hex,
    to_hex,
)
from protocol.p2p import framing
from protocol.p2p.config import CHUNK_SIZE, P2PConfig
from protocol.p2p.errors import (
    AllPeersFailed,
    BlobHashMismatch,
    FrameTooLarge,
    P2PError,
    PeerUnavailable,
    TransferTimeout,
)
from protocol.p2p.framing import Status
from protocol.p2p.host import NET_ERRORS, Dialer
from protocol.p2p.ratelimit import PeerLimiter
from protocol.p2p.registry import RegistryEntry, RegistryView
from protocol.p2p.sink import Sink
from protocol.p2p.sources import BlobSink, BlobSource, CheckpointSource, Served, SplicedFile
from protocol.p2p.traffic import NO_TRAFFIC, CountedStream, Traffic

log = logging.getLogger(__name__)
PROTOCOL = TProtocol(framing.BLOB_PROTOCOL_ID)
_WRITE_ERRORS: tuple[type[BaseException], ...] = (trio.TooSlowError, *NET_ERRORS)


@dataclass(frozen=True)
class Checkpoint:
    data: bytes
    proof: bytes  # not checked here: the requester checks it against the committed trace root
    # before using the checkpoint (validator/checks.py fetch_leaf, proof.check_served_leaf)
    blob_hash: bytes  # blake3(data), verified


@dataclass(frozen=True)
class StoredCheckpoint:
    """A checkpoint fetched into a `BlobSink`: the file its verified bytes were written to."""

    path: Path
    proof: bytes  # not checked here, as for `Checkpoint`
    blob_hash: bytes  # blake3 of the file's bytes, verified as they arrived


async def _close_quietly(stream: INetStream, timeout_s: float, reset: bool = False) -> None:
    # A frozen peer must not hold us here: its connection's write lock may be stuck behind
    # a full TCP buffer, so even writing the RST frame can block.
    with trio.move_on_after(timeout_s):
        try:
            await (stream.reset() if reset else stream.close())
        except NET_ERRORS:
            pass


class BlobServer:
    """The stream handler for BLOB_PROTOCOL_ID."""

    def __init__(
        self,
        config: P2PConfig,
        registry: RegistryView,
        limiter: PeerLimiter,
        blobs: BlobSource,
        checkpoints: CheckpointSource | None = None,
        traffic: Traffic = NO_TRAFFIC,
    ) -> None:
        self.config = config
        self.registry = registry
        self.limiter = limiter
        self.blobs = blobs
        self.checkpoints = checkpoints
        self.traffic = traffic  # bytes served and received, and refusals at the stream cap
        self.active = 0
        self.refusals: dict[str, int] = {}  # status name -> count, for tests and metrics

    async def handle(self, stream: INetStream) -> None:
        stream = CountedStream(stream, PROTOCOL, self.traffic)
        entry = self.registry.admitted_peer(stream.muxed_conn.peer_id)
        if entry is None:  # the connection gate let it in, but it lost eligibility since
            await self._refuse(stream, Status.REFUSED, "node key not bound to an eligible account")
            return
        if self.active >= self.config.max_inbound_streams:
            self.traffic.rate_limited("busy")
            await self._refuse(stream, Status.BUSY, "server at stream capacity")
            return
        if not self.limiter.open_stream(entry):
            await self._refuse(stream, Status.RATE_LIMITED, "too many concurrent streams")
            return
        self.active += 1
        failed = True
        try:
            await self._serve(stream, entry)
            failed = False
        except (P2PError, MalformedMessage, trio.TooSlowError) as exc:
            log.info("blob serve to %s failed: %r", stream.muxed_conn.peer_id, exc)
        except NET_ERRORS as exc:
            log.info("blob serve to %s aborted: %r", stream.muxed_conn.peer_id, exc)
        finally:
            self.active -= 1
            self.limiter.close_stream(entry)
            await _close_quietly(stream, self.config.close_timeout_s, reset=failed)

    async def _refuse(self, stream: INetStream, status: Status, reason: str) -> None:
        self.refusals[status.name] = self.refusals.get(status.name, 0) + 1
        log.info("refusing %s: %s", stream.muxed_conn.peer_id, reason)
        try:
            with trio.fail_after(self.config.read_timeout_s):
                await stream.write(framing.encode_error(status, reason))
        except _WRITE_ERRORS:
            pass
        await _close_quietly(stream, self.config.close_timeout_s)

    async def _serve(self, stream: INetStream, entry: RegistryEntry) -> None:
        try:
            request = await framing.read_request(stream, self.config.read_timeout_s)
        except FrameTooLarge as exc:
            await self._refuse(stream, Status.TOO_LARGE, str(exc))
            return
        except MalformedMessage as exc:
            await self._refuse(stream, Status.BAD_REQUEST, str(exc))
            return
        if not self.limiter.allow_request(entry):
            await self._refuse(stream, Status.RATE_LIMITED, "over request rate")
            return
        item = self._lookup(request)
        if item is None:
            await self._refuse(stream, Status.NOT_FOUND, "not held")
            return
        content, proof, known_hash = item
        with trio.fail_after(self.config.transfer_timeout_s):
            await self._send(stream, entry, content, proof, known_hash)

    def _lookup(
        self, request: BlobRequest | CheckpointRequest
    ) -> tuple[Served, bytes, bytes | None] | None:
        if isinstance(request, BlobRequest):
            found = self.blobs.get(from_hex(request.hash))
            return None if found is None else (found, b"", from_hex(request.hash))
        if self.checkpoints is None:
            return None
        got = self.checkpoints.get_checkpoint(
            request.round, from_hex(request.trace_root), request.index, request.part
        )
        return None if got is None else (got[0], got[1], None)

    async def _send(
        self,
        stream: INetStream,
        entry: RegistryEntry,
        content: Served,
        proof: bytes,
        known_hash: bytes | None,
    ) -> None:
        if isinstance(content, SplicedFile):
            await self._send_spliced(stream, entry, content, proof)
            return
        if isinstance(content, Path):
            with content.open("rb") as f:  # one handle per stream; streams are capped
                size = os.fstat(f.fileno()).st_size
                digest = known_hash or _hash_file(f)
                await self._write(stream, framing.encode_ok_head(size, digest, proof))
                f.seek(0)
                while chunk := f.read(framing.SEND_CHUNK_SIZE):
                    await self._send_chunk(stream, entry, chunk)
            return
        digest = known_hash or content_hash(content)
        await self._write(stream, framing.encode_ok_head(len(content), digest, proof))
        view = memoryview(content)
        for off in range(0, len(content), framing.SEND_CHUNK_SIZE):
            await self._send_chunk(stream, entry, view[off : off + framing.SEND_CHUNK_SIZE])

    async def _send_spliced(
        self, stream: INetStream, entry: RegistryEntry, content: SplicedFile, proof: bytes
    ) -> None:
        """Its hash in a first pass over the ranges, then the bytes in a second: held once, never whole."""
        with content.path.open("rb") as f:
            hasher = content_hasher()
            for chunk in _spliced_chunks(f, content):
                hasher.update(chunk)
            await self._write(stream, framing.encode_ok_head(content.size, hasher.digest(), proof))
            for chunk in _spliced_chunks(f, content):
                await self._send_chunk(stream, entry, chunk)

    async def _send_chunk(
        self, stream: INetStream, entry: RegistryEntry, chunk: bytes | memoryview
    ) -> None:
        delay = self.limiter.byte_delay(entry, len(chunk))
        if delay > 0:
            await trio.sleep(delay)  # pace over-budget peers instead of failing them
        for piece in framing.chunk_pieces(chunk):
            await self._write(stream, piece)

    async def _write(self, stream: INetStream, data: bytes) -> None:
        await framing.write_within(stream, data, self.config.read_timeout_s)


def _spliced_chunks(f: BinaryIO, content: SplicedFile) -> Iterator[bytes]:
    """`content`'s bytes in pieces of at most SEND_CHUNK_SIZE, read from `f` (its file)."""
    yield content.head
    for offset, length in content.ranges:
        f.seek(offset)
        while length:
            chunk = f.read(min(length, framing.SEND_CHUNK_SIZE))
            if not chunk:
                raise PeerUnavailable("a served file was truncated while it was being sent")
            length -= len(chunk)
            yield chunk


def _hash_file(f: object) -> bytes:
    hasher = content_hasher()
    while chunk := f.read(CHUNK_SIZE):  # type: ignore[attr-defined]
        hasher.update(chunk)
    return hasher.digest()


class BlobClient:
    """Fetches blobs and checkpoints over BLOB_PROTOCOL_ID, reusing open connections."""

    def __init__(
        self, host: IHost, dialer: Dialer, config: P2PConfig, traffic: Traffic = NO_TRAFFIC
    ) -> None:
        self.host = host
        self.dialer = dialer
        self.config = config
        self.traffic = traffic  # bytes fetched and requested

    async def _open(self, peer_id: ID, addrs: Sequence[multiaddr.Multiaddr]) -> INetStream:
        if addrs or not self.dialer.is_connected(peer_id):
            await self.dialer.connect(peer_id, addrs, redial_failed=False)
        try:
            with trio.fail_after(self.config.dial_timeout_s):
                stream = await self.host.new_stream(peer_id, [PROTOCOL])
                return CountedStream(stream, PROTOCOL, self.traffic)
        except trio.TooSlowError as exc:
            raise TransferTimeout(f"opening a stream to {peer_id} timed out") from exc
        except NET_ERRORS as exc:
            raise PeerUnavailable(f"cannot open a blob stream to {peer_id}: {exc}") from exc

    async def _exchange(
        self,
        peer_id: ID,
        addrs: Sequence[multiaddr.Multiaddr],
        request: BlobRequest | CheckpointRequest,
        store: BlobSink | None,
        expect_hash: bytes | None,
        max_bytes: int | None,
    ) -> tuple[framing.OkHead, bytes | Path]:
        cap = self.config.max_blob_size if max_bytes is None else max_bytes
        stream = await self._open(peer_id, addrs)
        sink: Sink | None = None
        ok = False
        try:
            with trio.fail_after(self.config.transfer_timeout_s):
                try:
                    request_bytes = framing.encode_request(request)
                    await framing.write_within(stream, request_bytes, self.config.read_timeout_s)
                except NET_ERRORS as exc:
                    raise PeerUnavailable(f"request to {peer_id} failed: {exc}") from exc
                reader = framing.StreamReader(stream, self.config.read_timeout_s)
                head = await framing.read_head(reader, cap)  # over the cap: refused here
                if expect_hash is not None and head.blob_hash != expect_hash:
                    raise BlobHashMismatch("peer announced a different hash than requested")
                sink = Sink.open(store, head.blob_len, self.config.spool_dir)
                await self._read_body(reader, head, sink)
            # fsync or reading a spooled blob back can take a while: off the event loop
            result = await trio.to_thread.run_sync(sink.commit, head.blob_hash)
            ok = True
            return head, result
        except trio.TooSlowError as exc:
            raise TransferTimeout(f"transfer from {peer_id} over its deadline") from exc
        finally:
            if not ok and sink is not None:
                sink.abort()
            await _close_quietly(stream, self.config.close_timeout_s, reset=not ok)

    async def _read_body(
        self, reader: framing.StreamReader, head: framing.OkHead, sink: Sink
    ) -> None:
        hasher = content_hasher()
        remaining = head.blob_len
        while remaining:
            left = await framing.read_chunk_len(reader, remaining)
            remaining -= left
            while left:
                data = await reader.some(left)
                hasher.update(data)
                sink.write(data)
                left -= len(data)
        if hasher.digest() != head.blob_hash:
            raise BlobHashMismatch("received bytes do not hash to the announced content hash")

    async def fetch_blob(
        self,
        peer_id: ID,
        blob_hash: bytes,
        addrs: Sequence[multiaddr.Multiaddr] = (),
        store: BlobSink | None = None,
        max_bytes: int | None = None,
    ) -> bytes | Path:
        """The verified blob: bytes, or its final path in `store` if one is given. A blob
        over `max_bytes` (default: `config.max_blob_size`) is refused with FrameTooLarge."""
        if store is not None and (held := store.get(blob_hash)) is not None:
            return held
        request = BlobRequest(hash=to_hex(blob_hash))
        _, result = await self._exchange(peer_id, addrs, request, store, blob_hash, max_bytes)
        return result

    async def fetch_checkpoint(
        self,
        peer_id: ID,
        round_: int,
        trace_root: bytes,
        index: int,
        addrs: Sequence[multiaddr.Multiaddr] = (),
        max_bytes: int | None = None,
        part: PartName = "all",
    ) -> Checkpoint:
        """The checkpoint (or `part` of it) and its proof, in memory (a large one spooled through
        a temp file on the way, sink.py); over `max_bytes`: FrameTooLarge."""
        request = CheckpointRequest(round=round_, trace_root=to_hex(trace_root), index=index, part=part)
        head, data = await self._exchange(peer_id, addrs, request, None, None, max_bytes)
        assert isinstance(data, bytes)
        return Checkpoint(data=data, proof=head.proof, blob_hash=head.blob_hash)

    async def fetch_checkpoint_into(
        self,
        peer_id: ID,
        round_: int,
        trace_root: bytes,
        index: int,
        store: BlobSink,
        addrs: Sequence[multiaddr.Multiaddr] = (),
        max_bytes: int | None = None,
        part: PartName = "all",
    ) -> StoredCheckpoint:
        """The checkpoint (or `part` of it) streamed into `store` (never held in memory) and its
        proof; over `max_bytes`: FrameTooLarge."""
        request = CheckpointRequest(round=round_, trace_root=to_hex(trace_root), index=index, part=part)
        head, path = await self._exchange(peer_id, addrs, request, store, None, max_bytes)
        assert isinstance(path, Path)
        return StoredCheckpoint(path=path, proof=head.proof, blob_hash=head.blob_hash)

    async def fetch_blob_any(
        self,
        peers: Sequence[tuple[ID, Sequence[multiaddr.Multiaddr]]],
        blob_hash: bytes,
        store: BlobSink | None = None,
        max_bytes: int | None = None,
    ) -> bytes | Path:
        """The blob from the first peer that delivers it (each transfer capped at `max_bytes`);
        AllPeersFailed (with each typed error) if none does.

        Peers already connected are asked first, in the given order. The others are dialled
        concurrently (at most `max_concurrent_dials` at once, each under its own timeout)
        and asked, one transfer at a time, in the order their connections come up; the
        remaining dials are cancelled once the blob is here. So unreachable candidates cost
        about one dial timeout in all, not one each (DESIGN.md §8.1 rule 8).
        """
        if store is not None and (held := store.get(blob_hash)) is not None:
            return held
        errors: dict[str, P2PError] = {}
        connected = [(p, a) for p, a in peers if self.dialer.is_connected(p)]
        for peer_id, _ in connected:
            got = await self._try_fetch(peer_id, blob_hash, store, max_bytes, errors)
            if got is not None:
                return got
        asked = {p for p, _ in connected}
        # peers whose last dial failed go last (a stable sort keeps the caller's order)
        rest = sorted(
            [(p, a) for p, a in peers if p not in asked], key=lambda pa: self.dialer.failures(pa[0])
        )
        if rest:
            got = await self._fetch_via_dials(rest, blob_hash, store, max_bytes, errors)
            if got is not None:
                return got
        raise AllPeersFailed(errors)

    async def _try_fetch(
        self,
        peer_id: ID,
        blob_hash: bytes,
        store: BlobSink | None,
        max_bytes: int | None,
        errors: dict[str, P2PError],
    ) -> bytes | Path | None:
        try:
            return await self.fetch_blob(peer_id, blob_hash, (), store, max_bytes)
        except P2PError as exc:
            log.info("fetch %s from %s failed: %s", blob_hash.hex()[:12], peer_id, exc)
            errors[str(peer_id)] = exc
            return None

    async def _fetch_via_dials(
        self,
        peers: Sequence[tuple[ID, Sequence[multiaddr.Multiaddr]]],
        blob_hash: bytes,
        store: BlobSink | None,
        max_bytes: int | None,
        errors: dict[str, P2PError],
    ) -> bytes | Path | None:
        limiter = trio.CapacityLimiter(self.config.max_concurrent_dials)
        send, recv = trio.open_memory_channel[ID](len(peers))

        async def dial(peer_id: ID, addrs: Sequence[multiaddr.Multiaddr]) -> None:
            try:
                async with limiter:
                    await self.dialer.connect(peer_id, addrs, redial_failed=False)
            except P2PError as exc:
                errors[str(peer_id)] = exc
                return
            try:
                send.send_nowait(peer_id)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass  # the blob already came from another peer

        async def dial_all() -> None:
            async with send, trio.open_nursery() as dials:
                for peer_id, addrs in peers:
                    dials.start_soon(dial, peer_id, addrs)

        result: bytes | Path | None = None
        async with trio.open_nursery() as nursery:
            nursery.start_soon(dial_all)
            async for peer_id in recv:
                result = await self._try_fetch(peer_id, blob_hash, store, max_bytes, errors)
                if result is not None:
                    break
            nursery.cancel_scope.cancel()
        recv.close()
        return result
