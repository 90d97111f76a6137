"""Fetching blobs, checkpoints and stage segments over the blob protocol, reusing open connections.

Each fetch names the cap of the kind it fetches (protocol/core/wire/blob_caps.py) and a longer
announced blob is refused (FrameTooLarge) before a byte of it is taken; the blake3 hash is
computed as the bytes arrive and checked before any is returned, and a partial download only
ever lives in a temp file (sink.py) that is deleted on failure and renamed into the
content-addressed directory on success. A blob wanted from any of several peers is asked of the
connected ones first, while the others are dialled concurrently.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import multiaddr
import trio
from libp2p.abc import IHost, INetStream
from libp2p.peer.id import ID

from protocol.core.crypto.hashing import content_hasher
from protocol.core.wire.messages import (
    BlobProtocolRequest,
    BlobRequest,
    CheckpointRequest,
    PartName,
    StageSegmentRequest,
    to_hex,
)
from protocol.p2p import framing
from protocol.p2p.blob_streams import PROTOCOL, close_quietly
from protocol.p2p.config import P2PConfig
from protocol.p2p.errors import (
    AllPeersFailed,
    BlobHashMismatch,
    P2PError,
    PeerUnavailable,
    TransferTimeout,
)
from protocol.p2p.host import NET_ERRORS, Dialer
from protocol.p2p.sink import Sink
from protocol.p2p.sources import BlobSink
from protocol.p2p.traffic import NO_TRAFFIC, CountedStream, Traffic

log = logging.getLogger(__name__)


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
        request: BlobProtocolRequest,
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
            await close_quietly(stream, self.config.close_timeout_s, reset=not ok)

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

    async def fetch_stage_segment(
        self,
        peer_id: ID,
        round_: int,
        trace_root: bytes,
        segment: int,
        max_bytes: int,
        addrs: Sequence[multiaddr.Multiaddr] = (),
    ) -> bytes:
        """The bundle served for `segment` of the stage whose trace root is `trace_root`
        (PROTOCOL.md §16.5), in memory (spooled through a temp file on the way when large).

        `max_bytes` is the caller's cap (`segment_bundle.max_segment_bytes` of the run's model):
        a longer bundle is refused with FrameTooLarge before a byte of it is read. BlobNotFound:
        the peer does not serve it; TransferTimeout: a read or the whole transfer ran past its
        deadline. Only its transport hash is checked here: whether the bytes are the stage's
        committed segment is the replay's question (`stage_replay.replay_stage_segment`)."""
        request = StageSegmentRequest(round=round_, trace_root=to_hex(trace_root), segment=segment)
        _, data = await self._exchange(peer_id, addrs, request, None, None, max_bytes)
        assert isinstance(data, bytes)  # no store given: the sink returns the bytes
        return data

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
        about one dial timeout in all, not one each (docs/INTEROP.md §2a).
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
