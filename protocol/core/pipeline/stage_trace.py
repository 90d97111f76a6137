"""A pipeline stage's trace (issue 32, DESIGN.md §8.4): its state hash every k steps and, per
segment, the root over the boundary tensors it received and sent, under one Merkle root.

Leaf layout for a round of H steps, k steps a segment, n = H/k segments (2n + 1 leaves):

    leaf i,          i = 0 .. n:      the stage's state hash after i·k steps (`stage_state_hash`)
    leaf n + 1 + j,  j = 0 .. n - 1:  segment j's boundary root (`stage_slots.segment_boundary_root`
                                      over steps j·k + 1 .. (j + 1)·k, every slot received and sent)

`stage_trace_root` is `hashing.merkle_root` over those leaves in that order: the stage's part of
its trace_root. A replay of segment j reads leaves j, j + 1 and n + 1 + j.
"""

from __future__ import annotations

from dataclasses import dataclass

from protocol.core.crypto.hashing import (
    Digest,
    MerkleProof,
    MerkleProofError,
    merkle_proof,
    merkle_root,
    verify_merkle_proof,
)
from protocol.core.errors import VeritrainError
from protocol.core.train.compute_config import ComputeConfig


class StageTraceError(VeritrainError):
    """Raised when a served stage trace has the wrong shape or does not hash to the committed root,
    when a leaf's proof does not lead to it, or when a segment or leaf index is out of range."""


@dataclass(frozen=True)
class StageTrace:
    checkpoint_hashes: tuple[Digest, ...]  # n + 1: after 0, k, ..., H steps
    boundary_roots: tuple[Digest, ...]  # n: one per segment

    @property
    def segments(self) -> int:
        return len(self.boundary_roots)


def checkpoint_leaf(i: int) -> int:
    """The leaf of the state after i·k steps."""
    return i


def boundary_leaf(segment: int, segments: int) -> int:
    """The leaf of segment `segment`'s boundary root in a trace of `segments` segments."""
    return segments + 1 + segment


def stage_trace_leaves(t: StageTrace) -> list[bytes]:
    return [*t.checkpoint_hashes, *t.boundary_roots]


def stage_trace_root(t: StageTrace) -> Digest:
    return merkle_root(stage_trace_leaves(t))


def stage_trace_size(cfg: ComputeConfig) -> int:
    return 2 * cfg.n_segments + 1


def stage_leaf_proof(t: StageTrace, leaf: int) -> MerkleProof:
    return merkle_proof(stage_trace_leaves(t), leaf)


def check_stage_leaf(root: bytes, leaf_index: int, cfg: ComputeConfig, leaf: bytes, proof: MerkleProof) -> None:
    """Raise StageTraceError unless `proof` shows `leaf` at `leaf_index` of a stage trace of
    `cfg`'s shape whose root is `root`."""
    size = stage_trace_size(cfg)
    if proof.index != leaf_index or proof.size != size:
        raise StageTraceError(f"proof is for leaf {proof.index} of {proof.size}, not {leaf_index} of {size}")
    try:
        verify_merkle_proof(root, leaf, proof)
    except MerkleProofError as exc:
        raise StageTraceError(f"stage trace leaf {leaf_index}: {exc}") from exc


def check_stage_trace(t: StageTrace, root: bytes, cfg: ComputeConfig) -> None:
    """Raise StageTraceError unless the trace has `cfg`'s shape and hashes to `root`."""
    if len(t.checkpoint_hashes) != cfg.n_segments + 1 or t.segments != cfg.n_segments:
        raise StageTraceError(f"a stage trace of {cfg.n_segments} segments has {cfg.n_segments + 1} checkpoint "
                              f"hashes and {cfg.n_segments} boundary roots")
    if stage_trace_root(t) != root:
        raise StageTraceError("served stage trace does not hash to the committed root")
