"""Serving blobs, checkpoints and stage segments (the stream handler of the blob protocol).

Only admitted peers (eligible registry entries) are served; each peer has a request bucket, a
byte bucket (served bytes are paced, not refused) and a concurrent-stream cap; the node has a
global stream cap. A refused request is answered with its status and the stream closed. Files
are sent in chunks, never read whole.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import trio
from libp2p.abc import INetStream

from protocol.core.crypto.hashing import content_hash, content_hasher
from protocol.core.wire.messages import (
    BlobProtocolRequest,
    BlobRequest,
    CheckpointRequest,
    MalformedMessage,
    from_hex,
)
from protocol.p2p import framing
from protocol.p2p.blob_streams import PROTOCOL, close_quietly, end_refused
from protocol.p2p.config import CHUNK_SIZE, P2PConfig
from protocol.p2p.errors import FrameTooLarge, P2PError, PeerUnavailable
from protocol.p2p.framing import Status
from protocol.p2p.host import NET_ERRORS
from protocol.p2p.ratelimit import PeerLimiter
from protocol.p2p.registry import RegistryEntry, RegistryView
from protocol.p2p.sources import BlobSource, CheckpointSource, Served, SplicedFile
from protocol.p2p.stage_segments import StageSegmentSource
from protocol.p2p.traffic import NO_TRAFFIC, CountedStream, Traffic

log = logging.getLogger(__name__)
_WRITE_ERRORS: tuple[type[BaseException], ...] = (trio.TooSlowError, *NET_ERRORS)


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
        segments: StageSegmentSource | None = None,
    ) -> None:
        self.config = config
        self.registry = registry
        self.limiter = limiter
        self.blobs = blobs
        self.checkpoints = checkpoints
        self.segments = segments  # stage segment bundles (PROTOCOL.md §16.5); None: serves none
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
            await close_quietly(stream, self.config.close_timeout_s, reset=failed)

    async def _refuse(self, stream: INetStream, status: Status, reason: str) -> None:
        self.refusals[status.name] = self.refusals.get(status.name, 0) + 1
        log.info("refusing %s: %s", stream.muxed_conn.peer_id, reason)
        try:
            with trio.fail_after(self.config.read_timeout_s):
                await stream.write(framing.encode_error(status, reason))
        except _WRITE_ERRORS:
            pass
        await end_refused(stream, self.config.close_timeout_s)

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
        item = self._lookup(request, entry.account)
        if item is None:
            await self._refuse(stream, Status.NOT_FOUND, "not held")
            return
        content, proof, known_hash = item
        with trio.fail_after(self.config.transfer_timeout_s):
            await self._send(stream, entry, content, proof, known_hash)

    def _lookup(
        self, request: BlobProtocolRequest, asker: bytes
    ) -> tuple[Served, bytes, bytes | None] | None:
        """(content, proof, its hash if the request named it), or None: not held."""
        if isinstance(request, BlobRequest):
            found = self.blobs.get(from_hex(request.hash))
            return None if found is None else (found, b"", from_hex(request.hash))
        if isinstance(request, CheckpointRequest):
            return self._lookup_checkpoint(request, asker)
        if self.segments is None:
            return None
        # no proof: the fetcher checks the bundle against the trace root by replaying it
        segment = self.segments.get_segment(
            request.round, from_hex(request.trace_root), request.segment, asker
        )
        return None if segment is None else (segment, b"", None)

    def _lookup_checkpoint(
        self, request: CheckpointRequest, asker: bytes
    ) -> tuple[Served, bytes, bytes | None] | None:
        if self.checkpoints is None:
            return None
        got = self.checkpoints.get_checkpoint(
            request.round, from_hex(request.trace_root), request.index, request.part, asker
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
