"""Checks without replay: leaf 0 follows from θ_r, and the update from the trace's ends."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from protocol.core.checkpoint.format import (
    CheckpointHeader,
    Leaves,
    checkpoint_leaves,
    hash_digests,
    header_bytes,
    tensor_digest,
)
from protocol.core.checkpoint.part_bytes import CheckpointPart
from protocol.core.checkpoint.parts import ServedCheckpoint
from protocol.core.crypto.hashing import (
    Digest,
)
from protocol.core.model.gpt import (
    Params,
    config_hash,
    num_params,
    param_shapes,
)
from protocol.core.proof.replay import ServedBlob, served_part
from protocol.core.proof.trace import Trace, carry_hash_of
from protocol.core.proof.work import derive_update
from protocol.core.train.compress import (
    UpdateFormatError,
    decode_update,
    encode_update,
    expected_header,
    update_content_hash,
)
from protocol.core.train.training import (
    RoundTask,
    fresh_checkpoint,
)

# checks without replay: leaf 0 and update derivation


@dataclass(frozen=True)
class DerivationResult:
    """Evidence from the leaf-0 and derivation checks; `failures` empty means both passed."""

    failures: tuple[str, ...]  # e.g. "leaf0-state", "carry-in", "update-bytes", "carry-out"
    missing_leaf: int | None  # leaf 0 or the final leaf not served
    leaf0_expected: Digest | None  # hash of θ_r + fresh first moment + the claimed carry
    leaf0_committed: Digest
    update_expected: Digest | None  # content hash of the re-derived blob
    update_committed: Digest
    carry_expected: Digest | None  # carry out of this round, re-derived
    carry_committed: Digest


def _zero_digest(shape: tuple[int, ...]) -> Digest:
    return tensor_digest(torch.zeros(shape))


def expected_leaf0_hash(task: RoundTask, theta_r: Params, served: Leaves) -> Digest:
    """The hash leaf 0 must have: θ_r, a zero first moment, step 0, the seeded RNG state, and
    the carried second moment and `ef` as `served` lists their digests (bound by the carry-in
    hash). `warm` follows from the second moment, as `training.fresh_checkpoint` sets it."""
    fresh = fresh_checkpoint(task, theta_r, None)  # zero carry: its p, m and rng are leaf 0's
    leaves = checkpoint_leaves(fresh)
    carried = {k: served[k] for k in leaves if k.startswith("v/") or k == "ef"}
    zeros = {k: _zero_digest(tuple(v.shape)) for k, v in fresh.exp_avg_sq.items()}
    warm = any(carried[f"v/{k}"] != zeros[k] for k in zeros)
    header = CheckpointHeader(step=0, model=config_hash(task.model).hex(), has_ef=True, warm=warm)
    return hash_digests("checkpoint", header_bytes(header), leaves | carried)


def _leaf0_failures(task: RoundTask, leaf0: ServedCheckpoint, theta_r: Params, committed: bytes,
                    carry_in_hash: bytes) -> tuple[list[str], Digest | None]:
    if not leaf0.header.has_ef:
        return ["ef-missing"], None
    failures = [] if carry_hash_of(leaf0.leaves["ef"], leaf0.leaves) == carry_in_hash else ["carry-in"]
    leaf0_expected = expected_leaf0_hash(task, theta_r, leaf0.leaves)
    if leaf0_expected != committed:
        failures.append("leaf0-state")
    return failures, leaf0_expected


def verify_update_derivation(task: RoundTask, trace: Trace, theta_r: Params, carry_in_hash: bytes,
                             leaf0_blob: ServedBlob, final_blob: ServedBlob,
                             blob: bytes) -> DerivationResult:
    """Check leaf 0 is θ_r with a zero first moment and the committed carry (`carry_in_hash`:
    the carry hash of the miner's previous trace, or `zero_carry_hash` after a missed round),
    and that the blob and the carry out follow from leaf 0 and the final checkpoint. Leaf 0
    need only be served with its `ef` and the final leaf with its parameters (checkpoint_parts.py):
    every other tensor is checked by its digest."""
    cfg, n = task.cfg, len(trace.checkpoint_hashes)
    blob_hash = update_content_hash(blob)
    # one served checkpoint decoded at a time: leaf 0 is checked and dropped (its error-feedback
    # buffer kept) before the final one is decoded
    leaf0 = served_part(leaf0_blob, trace.checkpoint_hashes[0], task, CheckpointPart.EF)
    if leaf0 is None:
        return DerivationResult((), 0, None, trace.checkpoint_hashes[0], None, blob_hash, None, trace.carry_hash)
    failures, leaf0_expected = _leaf0_failures(task, leaf0, theta_r, trace.checkpoint_hashes[0],
                                               carry_in_hash)
    ef_in = leaf0.tensors["ef"] if leaf0.header.has_ef else torch.zeros(num_params(task.model))
    del leaf0
    final = served_part(final_blob, trace.checkpoint_hashes[-1], task, CheckpointPart.PARAMS)
    if final is None:
        return DerivationResult((), n - 1, None, trace.checkpoint_hashes[0], None, blob_hash, None,
                                trace.carry_hash)
    final_params = {k: final.tensors[f"p/{k}"] for k in param_shapes(task.model)}
    derived, residual = derive_update(theta_r, final_params, ef_in, cfg)
    want = expected_header(num_params(task.model), cfg.chunk, cfg.topk, cfg.bits)
    try:
        same = encode_update(decode_update(blob, want)) == derived
    except UpdateFormatError:
        same = False
    if not same:
        failures.append("update-bytes")
    carry_out = carry_hash_of(tensor_digest(residual), final.leaves)
    if carry_out != trace.carry_hash:
        failures.append("carry-out")
    return DerivationResult(tuple(failures), None, leaf0_expected, trace.checkpoint_hashes[0],
                            update_content_hash(derived), blob_hash, carry_out,
                            trace.carry_hash)
