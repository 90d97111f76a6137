"""Segment replay: re-run a challenged segment and compare it with the served checkpoints."""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from protocol.core.checkpoint.format import (
    Checkpoint,
    CheckpointFormatError,
)
from protocol.core.checkpoint.part_bytes import CheckpointPart
from protocol.core.checkpoint.parts import ServedCheckpoint, decode_served
from protocol.core.crypto.hashing import (
    Digest,
)
from protocol.core.hardware.observe import check_profile
from protocol.core.hardware.replay_profile import ReplayProfile
from protocol.core.model.gpt import (
    LanguageModel,
    build_model,
    flatten,
)
from protocol.core.proof.trace import Trace
from protocol.core.train.data import Dataset
from protocol.core.train.training import (
    RoundTask,
    Stepper,
    batch_fn,
    local_stepper,
)


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
