"""Proof of compute: the trace, challenges, segment replay and derivation checks.

Trace leaves (docs/PROTOCOL.md): the H/k + 1 checkpoint hashes (steps 0, k, ..., H), then the hash of
the H per-step losses, then the hash of what the miner carries into its next round (the
error-feedback residual and AdamW's second moment: `training.Carry`). The trace root is their
Merkle root and is committed on chain with the update hash.

Every check here returns evidence (`ReplayResult`, `DerivationResult`); `protocol.core.verdict`
turns evidence into a fraud-report kind with thresholds from config.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from protocol.core.checkpoint import (
    MAX_HEADER_BYTES,
    BlobFormatError,
    Checkpoint,
    CheckpointFormatError,
    CheckpointHeader,
    Leaves,
    checkpoint_hash,
    checkpoint_leaves,
    hash_digests,
    header_bytes,
    read_safetensors,
    tensor_digest,
)
from protocol.core.checkpoint_parts import CheckpointPart, ServedCheckpoint, decode_served
from protocol.core.compress import (
    UpdateFormatError,
    compress_with_feedback,
    decode_update,
    encode_update,
    expected_header,
    update_content_hash,
)
from protocol.core.data import Dataset, sample_distinct
from protocol.core.errors import VeritrainError
from protocol.core.hashing import (
    Digest,
    MerkleProof,
    MerkleProofError,
    blake3_hash,
    decode_merkle_proof,
    merkle_proof,
    merkle_root,
    u64,
    verify_merkle_proof,
)
from protocol.core.model import (
    LanguageModel,
    ModelConfig,
    Params,
    build_model,
    config_hash,
    flat_difference,
    flatten,
    num_params,
    param_shapes,
)
from protocol.core.replay_profile import ReplayProfile, check_profile
from protocol.core.safetensors_layout import serialized
from protocol.core.signing import NodeIdentity, verify
from protocol.core.training import (
    Carry,
    ComputeConfig,
    RoundTask,
    Stepper,
    TrainedRound,
    batch_fn,
    fresh_checkpoint,
    local_stepper,
    zero_carry,
)

CHALLENGE_DOMAIN = b"veritrain/challenge/v1"


class TraceError(VeritrainError):
    """Raised when a served trace is malformed or does not hash to the committed trace root."""


class ProofMismatch(VeritrainError):
    """Raised when a served checkpoint's Merkle proof does not lead from the checkpoint's hash,
    at the requested leaf of a trace of the configured size, to the committed trace root (or
    the checkpoint or the proof is malformed). The peer did not serve that leaf; by itself
    this is never evidence of fraud (anyone can serve garbage)."""


class ChallengeError(VeritrainError):
    """Raised when a challenge's seed or segments do not follow from its signature."""


# ---------------------------------------------------------------------------------------
# trace


@dataclass(frozen=True)
class Trace:
    checkpoint_hashes: tuple[Digest, ...]  # H/k + 1 leaves
    losses: tuple[float, ...]  # H per-step losses (float32 values)
    carry_hash: Digest  # what the miner carries into round r+1 (residual, second moment)


def losses_hash(losses: Sequence[float]) -> Digest:
    return blake3_hash("losses", np.asarray(losses, dtype="<f4").tobytes())


def _carry_tensors(carry: Carry) -> dict[str, Tensor]:
    return {"residual": carry.residual} | {f"v/{k}": t for k, t in carry.second_moment.items()}


def carry_hash(carry: Carry) -> Digest:
    return carry_hash_of(tensor_digest(carry.residual), {f"v/{k}": tensor_digest(t) for k, t in carry.second_moment.items()})


def carry_hash_of(residual: bytes, second_moment: Leaves | dict[str, bytes]) -> Digest:
    """A carry's hash from digests: the residual's, and the second moment's as `v/<name>` keys
    (a checkpoint's own `v/*` digests), so a part of a checkpoint binds its carry."""
    v = {k: d for k, d in second_moment.items() if k.startswith("v/")}
    return hash_digests("carry", b"", {"residual": residual} | v)


def encode_carry(carry: Carry) -> bytes:
    """A miner's own carry between rounds, as stored in its data dir."""
    return b"".join(serialized(_carry_tensors(carry), {}))  # one copy: the bytes themselves


def decode_carry(blob: bytes, model: ModelConfig) -> Carry:
    """Parse a stored carry; raise CheckpointFormatError unless it fits the model."""
    try:
        tensors, _ = read_safetensors(blob, 2 * 4 * num_params(model) + MAX_HEADER_BYTES)
    except BlobFormatError as exc:
        raise CheckpointFormatError(f"bad carry: {exc}") from exc
    shapes = param_shapes(model)
    want = {"residual": (num_params(model),)} | {f"v/{k}": s for k, s in shapes.items()}
    if {k: tuple(t.shape) for k, t in tensors.items()} != want:
        raise CheckpointFormatError("carry does not fit the model")
    if any(t.dtype != torch.float32 for t in tensors.values()):
        raise CheckpointFormatError("carry tensors must be float32")
    return Carry(tensors["residual"], {k: tensors[f"v/{k}"] for k in shapes})


def zero_carry_hash(model: ModelConfig) -> Digest:
    """What a miner carries into its first round, or after a round it missed."""
    return carry_hash(zero_carry(model))


def trace_leaves(t: Trace) -> list[bytes]:
    return [*t.checkpoint_hashes, losses_hash(t.losses), t.carry_hash]


def trace_root(t: Trace) -> Digest:
    return merkle_root(trace_leaves(t))


def leaf_proof(t: Trace, leaf: int) -> MerkleProof:
    return merkle_proof(trace_leaves(t), leaf)


def trace_size(cfg: ComputeConfig) -> int:
    """Leaves of a trace: H/k + 1 checkpoints, the losses hash, the carry hash."""
    return cfg.n_segments + 3


def check_leaf_proof(root: bytes, leaf_index: int, n_leaves: int, leaf: bytes, proof: bytes) -> None:
    """Raise ProofMismatch unless `proof` (docs/INTEROP.md §6 encoding) shows `leaf` (the
    served checkpoint's hash) at `leaf_index` of an `n_leaves` trace whose root is `root`."""
    try:
        p = decode_merkle_proof(proof)
    except MerkleProofError as exc:
        raise ProofMismatch(f"leaf {leaf_index}: {exc}") from exc
    if p.index != leaf_index or p.size != n_leaves:
        raise ProofMismatch(f"proof is for leaf {p.index} of {p.size}, not {leaf_index} of {n_leaves}")
    try:
        verify_merkle_proof(root, leaf, p)
    except MerkleProofError as exc:
        raise ProofMismatch(f"leaf {leaf_index}: {exc}") from exc


def check_served_leaf(blob: bytes, proof: bytes, root: bytes, leaf_index: int, model: ModelConfig,
                      cfg: ComputeConfig, part: CheckpointPart = CheckpointPart.ALL) -> None:
    """Raise ProofMismatch unless `blob` is a checkpoint of `model` holding `part` (whole, or
    a part: checkpoint_parts.py) whose hash sits at checkpoint leaf `leaf_index` (0..H/k) under
    the committed trace root `root`."""
    if not 0 <= leaf_index <= cfg.n_segments:
        raise ProofMismatch(f"leaf {leaf_index} is not a checkpoint leaf (0..{cfg.n_segments})")
    try:
        served = decode_served(blob, model)
    except CheckpointFormatError as exc:
        raise ProofMismatch(f"leaf {leaf_index}: served bytes are not a checkpoint: {exc}") from exc
    if not served.holds(part):
        raise ProofMismatch(f"leaf {leaf_index}: served without its {part.value} part")
    check_leaf_proof(root, leaf_index, trace_size(cfg), served.hash, proof)


def check_trace(t: Trace, root: bytes, cfg: ComputeConfig) -> None:
    """Raise TraceError unless the trace has the configured shape and hashes to `root`."""
    if len(t.checkpoint_hashes) != cfg.n_segments + 1 or len(t.losses) != cfg.inner_steps:
        raise TraceError("trace has the wrong number of checkpoints or losses")
    if trace_root(t) != root:
        raise TraceError("served trace does not hash to the committed trace root")


# ---------------------------------------------------------------------------------------
# miner side: derive the update and build the trace


@dataclass(frozen=True)
class MinerWork:
    trace: Trace
    blob: bytes  # the update, safetensors bytes
    carry: Carry  # into the next round: error feedback and the final second moment
    checkpoints: list[Checkpoint]  # served on request, by leaf index


def derive_update(theta_r: Params, final_params: Params, ef_in: Tensor,
                  cfg: ComputeConfig) -> tuple[bytes, Tensor]:
    """Δ = θ_r − θ_H, compressed with error feedback: (update blob, residual)."""
    delta = flat_difference(theta_r, final_params)  # (N,)
    c, residual = compress_with_feedback(delta, ef_in, cfg.chunk, cfg.topk, cfg.bits, cfg.ef_decay, consume=True)
    return encode_update(c), residual


def build_work(task: RoundTask, trained: TrainedRound, theta_r: Params) -> MinerWork:
    leaf0, final = trained.checkpoints[0], trained.checkpoints[-1]
    assert leaf0.ef is not None
    blob, residual = derive_update(theta_r, final.params, leaf0.ef, task.cfg)
    carry = Carry(residual, final.exp_avg_sq)
    hashes = tuple(checkpoint_hash(c, task.model) for c in trained.checkpoints)
    trace = Trace(hashes, tuple(trained.losses), carry_hash(carry))
    return MinerWork(trace, blob, carry, trained.checkpoints)


# ---------------------------------------------------------------------------------------
# challenges: seed = H(σ), σ = ed25519(validator, domain ‖ r ‖ miner ‖ B)


@dataclass(frozen=True)
class Challenge:
    signature: bytes  # σ, carried in reports so voters can recheck it
    seed: Digest  # H(σ)
    segments: tuple[int, ...]  # sorted segment indices to replay


def challenge_message(round_: int, miner: bytes, blockhash: bytes) -> bytes:
    return CHALLENGE_DOMAIN + u64(round_) + miner + blockhash


def choose_segments(seed: bytes, n_segments: int, q: int) -> tuple[int, ...]:
    return tuple(sorted(sample_distinct(seed, range(n_segments), q, label=7)))


def make_challenge(identity: NodeIdentity, round_: int, miner: bytes, blockhash: bytes,
                   cfg: ComputeConfig) -> Challenge:
    sig = identity.sign(challenge_message(round_, miner, blockhash))
    seed = blake3_hash("challenge-seed", sig)
    return Challenge(sig, seed, choose_segments(seed, cfg.n_segments, cfg.segments_per_validator))


def verify_challenge(public_key: bytes, round_: int, miner: bytes, blockhash: bytes,
                     ch: Challenge, cfg: ComputeConfig) -> None:
    """Raise SignatureError/ChallengeError unless `ch` is the validator's honest challenge."""
    verify(public_key, challenge_message(round_, miner, blockhash), ch.signature)
    seed = blake3_hash("challenge-seed", ch.signature)
    if ch.seed != seed or ch.segments != choose_segments(seed, cfg.n_segments,
                                                          cfg.segments_per_validator):
        raise ChallengeError("challenge seed or segments do not follow from its signature")


# ---------------------------------------------------------------------------------------
# replay


class ReplayStatus(enum.StrEnum):
    MATCH = "match"  # bitwise equal (exact mode) - accepted
    TOLERATED = "tolerated"  # within δ in tolerance mode - accepted but flagged
    MISMATCH = "mismatch"  # replay differs: evidence for a `replay` report
    UNAVAILABLE = "unavailable"  # a challenged checkpoint was not served (or not the committed one)


@dataclass(frozen=True)
class ReplayResult:
    segment: int
    start_leaf: int
    end_leaf: int
    mode: str  # "exact" or "tolerance"
    status: ReplayStatus
    expected_hash: Digest  # end leaf hash in the committed trace
    actual_hash: Digest | None  # hash of the replayed end checkpoint (None if not replayed)
    max_abs_err: float  # over params, replayed vs served end checkpoint (nan if unknown)
    mean_abs_err: float
    rel_err: float  # ||replayed - served|| / ||served||
    losses_match: bool  # replayed per-step losses bitwise equal to the trace's
    missing_leaf: int | None = None  # the leaf that was not served, for unavailability reports
    # checkpoint hash of the full state after each of the k replayed steps, in order (the last
    # is `actual_hash`); empty if not replayed. The replay witness binds them (core/witness.py).
    inner_hashes: tuple[Digest, ...] = ()


ServedBlob = bytes | Callable[[], bytes | None] | None  # the bytes, or a call that reads them when needed


def served_part(served: ServedBlob, expected: bytes, task: RoundTask,
                part: CheckpointPart = CheckpointPart.ALL) -> ServedCheckpoint | None:
    """Decode a served checkpoint or part; None if absent, malformed, not the committed one, or
    without `part`'s tensors. A callable is read only here, so its bytes live no longer than
    the decoding."""
    blob = served() if callable(served) else served
    if blob is None:
        return None
    try:
        got = decode_served(blob, task.model)
    except CheckpointFormatError:
        return None
    return got if got.hash == expected and got.holds(part) else None


def served_checkpoint(served: ServedBlob, expected: bytes, task: RoundTask) -> Checkpoint | None:
    """A whole served checkpoint that is the committed one, or None."""
    got = served_part(served, expected, task)
    return None if got is None else got.whole(task.model)


def _errors(replayed: Checkpoint, served: ServedCheckpoint | None) -> tuple[float, float, float]:
    if served is None or not served.holds(CheckpointPart.PARAMS):
        return float("nan"), float("nan"), float("nan")
    a = flatten(replayed.params)  # (N,)
    b = torch.cat([served.tensors[f"p/{k}"].reshape(-1) for k in replayed.params])  # (N,), the same order
    diff = (a - b).abs()
    rel = float(torch.linalg.vector_norm(a - b) / torch.linalg.vector_norm(b).clamp_min(1e-30))
    return float(diff.max()), float(diff.mean()), rel


def _status(match: bool, rel: float, end_served: bool, mode: str, tol: float) -> ReplayStatus:
    if match:
        return ReplayStatus.MATCH if end_served else ReplayStatus.UNAVAILABLE
    if mode == "tolerance" and rel <= tol:
        return ReplayStatus.TOLERATED
    if mode == "tolerance" and not end_served:
        return ReplayStatus.UNAVAILABLE
    return ReplayStatus.MISMATCH


def replay_segment(task: RoundTask, ds: Dataset, trace: Trace, segment: int,
                   start_blob: ServedBlob, end_blob: ServedBlob, profile: ReplayProfile,
                   mode: str = "exact", model: LanguageModel | None = None,
                   stepper: Stepper | None = None) -> ReplayResult:
    """Replay segment `segment` (k steps from leaf s to leaf s+1) and compare.

    Raises ProfileMismatch (not fraud) if this process does not run `profile`. An unserved
    start checkpoint gives UNAVAILABLE; a replay that differs gives MISMATCH even when the
    end checkpoint is withheld, since the committed hash suffices in exact mode. The replay
    runs on the profile's device in this process, or through `stepper` (one that hashes every
    step: a world size above 1 brings its process group, protocol/node/ddp_worker.py).
    """
    check_profile(profile)
    k = task.cfg.checkpoint_every
    s, e = segment, segment + 1
    expected = trace.checkpoint_hashes[e]
    start = served_checkpoint(start_blob, trace.checkpoint_hashes[s], task)
    if start is None:
        nan = float("nan")
        return ReplayResult(segment, s, e, mode, ReplayStatus.UNAVAILABLE, expected, None,
                            nan, nan, nan, False, missing_leaf=s)
    if stepper is None:
        stepper = local_stepper(profile, model if model is not None else build_model(task.model),
                                batch_fn(task, ds), task.cfg, hash_with=task.model)
    # `start` is not read again (consumed), and the end checkpoint is decoded only after the
    # replay: the peak holds one served checkpoint, not two
    run = stepper(start, k, consume=True)
    del start
    replayed, losses, inner = run.end, run.losses, run.step_hashes
    assert len(inner) == k, "a replay's stepper hashes every step"
    actual = inner[-1]  # the state after the last step is the replayed end checkpoint
    # exact mode decides on the hash: the end need only be served as its digest list (`HASHES`)
    end = served_part(end_blob, expected, task, CheckpointPart.PARAMS if mode == "tolerance" else CheckpointPart.HASHES)
    max_err, mean_err, rel = _errors(replayed, end)
    claimed = np.asarray(trace.losses[s * k : e * k], dtype="<f4")
    losses_ok = bool(np.array_equal(np.asarray(losses, dtype="<f4"), claimed))
    status = _status(actual == expected and losses_ok, rel, end is not None, mode,
                     task.cfg.tolerance)
    missing = e if status is ReplayStatus.UNAVAILABLE else None
    return ReplayResult(segment, s, e, mode, status, expected, actual, max_err, mean_err, rel,
                        losses_ok, missing_leaf=missing, inner_hashes=tuple(inner))


# ---------------------------------------------------------------------------------------
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
