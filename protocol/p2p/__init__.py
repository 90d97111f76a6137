"""Peer-to-peer layer: the only package that imports libp2p (see docs/INTEROP.md for the wire)."""

from protocol.p2p.blob_client import BlobClient, Checkpoint
from protocol.p2p.blob_server import BlobServer
from protocol.p2p.config import CHUNK_SIZE, P2PConfig
from protocol.p2p.gossip import message_id, topic_for
from protocol.p2p.node import P2PNode
from protocol.p2p.ratelimit import PeerLimiter, RateLimits, RatePolicy, limits_for
from protocol.p2p.registry import RegistryEntry, RegistryView, node_key_of, peer_id_of
from protocol.p2p.sources import (
    BlobSink,
    BlobSource,
    CheckpointSource,
    DirectoryBlobSource,
    MemoryCheckpointSource,
)
from protocol.p2p.stage_segments import DirectoryStageSegments, StageSegmentSource

__all__ = [
    "CHUNK_SIZE",
    "BlobClient",
    "BlobServer",
    "BlobSink",
    "BlobSource",
    "Checkpoint",
    "CheckpointSource",
    "DirectoryBlobSource",
    "DirectoryStageSegments",
    "MemoryCheckpointSource",
    "P2PConfig",
    "P2PNode",
    "PeerLimiter",
    "RateLimits",
    "RatePolicy",
    "RegistryEntry",
    "RegistryView",
    "StageSegmentSource",
    "limits_for",
    "message_id",
    "node_key_of",
    "peer_id_of",
    "topic_for",
]
