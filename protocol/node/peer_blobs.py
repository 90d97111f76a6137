"""A node's blobs from peers: whom to ask (the named node first, then every validator, then
everyone else), a fetch capped by the blob's kind and streamed into the store, and durable puts.
A mixin of `NodeContext`, whose constructor sets the attributes declared here."""

from __future__ import annotations

import logging
from pathlib import Path

import trio

from protocol.core.wire.blob_caps import BlobCaps, BlobKind
from protocol.node.keys import NodeKeys
from protocol.node.logs import kv
from protocol.node.node_config import NodeConfig
from protocol.node.store import DataDir
from protocol.p2p.errors import P2PError
from protocol.p2p.node import P2PNode
from protocol.p2p.registry import RegistryView


class PeerBlobs:
    keys: NodeKeys
    config: NodeConfig
    log: logging.Logger
    data: DataDir
    registry: RegistryView
    caps: BlobCaps  # what each kind of fetched blob may weigh
    p2p: P2PNode

    def node_key_of(self, account: str) -> bytes | None:
        entry = self.registry.lookup_by_account(bytes.fromhex(account[2:]))
        return None if entry is None else entry.node_key

    def peers_for(self, first: str | None = None) -> list[bytes]:
        """Node keys to ask for a blob: `first`'s, then every validator's, then everyone else's."""
        keys = [k for k in [self.node_key_of(first)] if k] if first else []
        entries = sorted(self.registry.entries(), key=lambda e: e.role != "validator")
        keys += [e.node_key for e in entries if e.node_key not in keys and e.node_key != self.keys.identity.public_key]
        return keys

    async def fetch_blob(self, blob_hash: bytes, kind: BlobKind, first: str | None = None) -> bytes | None:
        """A verified blob from the store, or from peers: refused over `kind`'s cap before a
        byte of it is taken, streamed into the store as it arrives, then read once."""
        if self.data.blobs.has(blob_hash):
            return self.data.blobs.read(blob_hash)
        peers = self.peers_for(first)
        if not peers:
            return None
        with trio.move_on_after(self.config.fetch_timeout_s):
            try:
                got = await self.p2p.fetch_blob_any(peers, blob_hash, self.data.blobs, self.caps.of(kind))
            except P2PError as exc:
                self.log.info("blob unavailable %s", kv(hash=blob_hash.hex()[:12], kind=kind.value,
                                                        reason=type(exc).__name__))
                return None
            return got if isinstance(got, bytes) else Path(got).read_bytes()  # hashed as it arrived
        self.log.info("blob fetch timed out %s", kv(hash=blob_hash.hex()[:12], kind=kind.value))
        return None

    async def put_blob(self, data: bytes) -> bytes:
        """Store a blob durably (hash, write, fsync) without blocking the event loop."""
        return await trio.to_thread.run_sync(self.data.blobs.put, data)
