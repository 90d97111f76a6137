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
    tensor_digest,
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
    Params,
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
    # tolerance mode, accepted but flagged: parameters, both moments and every loss within δ,
    # the step counter and RNG state bit for bit
    TOLERATED = "tolerated"
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
    rel_err: float  # ||replayed - served|| / ||served||: params, and both moments in tolerance mode (the largest)
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


def _flat(served: ServedCheckpoint, prefix: str, names: Params) -> torch.Tensor:
    return torch.cat([served.tensors[f"{prefix}/{k}"].reshape(-1) for k in names])  # (N,), replayed's order


def _relative(a: torch.Tensor, b: torch.Tensor) -> float:
    return float(torch.linalg.vector_norm(a - b) / torch.linalg.vector_norm(b).clamp_min(1e-30))


def _errors(replayed: Checkpoint, served: ServedCheckpoint | None) -> tuple[float, float, float]:
    """(max, mean) absolute parameter error and the largest relative L2 distance of the
    parameters and both AdamW moments (nan for what was not served)."""
    if served is None or not served.holds(CheckpointPart.PARAMS):
        return float("nan"), float("nan"), float("nan")
    a = flatten(replayed.params)  # (N,)
    b = _flat(served, "p", replayed.params)  # (N,)
    diff = (a - b).abs()
    rel = _relative(a, b)
    if served.holds(CheckpointPart.ALL):  # tolerance mode: the moments are compared too
        rel = max(rel, _relative(flatten(replayed.exp_avg), _flat(served, "m", replayed.params)),
                  _relative(flatten(replayed.exp_avg_sq), _flat(served, "v", replayed.params)))
    return float(diff.max()), float(diff.mean()), rel


def _losses_within(replayed: np.ndarray, claimed: np.ndarray, tol: float) -> bool:
    """Every per-step loss within δ of the claimed one, relative to it."""
    return bool(np.all(np.abs(replayed.astype(np.float64) - claimed) <= tol * np.abs(claimed.astype(np.float64))))


def _exact_counters(replayed: Checkpoint, served: ServedCheckpoint | None) -> bool:
    """The step counter and the RNG state bit for bit (the RNG by its committed digest)."""
    return (served is not None and served.header.step == replayed.step
            and served.leaves.get("rng") == tensor_digest(replayed.rng))


def _status(match: bool, tolerated: bool, end_served: bool, mode: str) -> ReplayStatus:
    if match:
        return ReplayStatus.MATCH if end_served else ReplayStatus.UNAVAILABLE
    if mode == "tolerance" and tolerated:
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
    # tolerance mode compares everything exact mode binds: the whole end checkpoint is served
    end = served_part(end_blob, expected, task, CheckpointPart.ALL if mode == "tolerance" else CheckpointPart.HASHES)
    max_err, mean_err, rel = _errors(replayed, end)
    claimed = np.asarray(trace.losses[s * k : e * k], dtype="<f4")
    replayed_losses = np.asarray(losses, dtype="<f4")
    losses_ok = bool(np.array_equal(replayed_losses, claimed))
    tol = task.cfg.tolerance
    tolerated = (rel <= tol and _losses_within(replayed_losses, claimed, tol) and _exact_counters(replayed, end))
    status = _status(actual == expected and losses_ok, tolerated, end is not None, mode)
    missing = e if status is ReplayStatus.UNAVAILABLE else None
    return ReplayResult(segment, s, e, mode, status, expected, actual, max_err, mean_err, rel,
                        losses_ok, missing_leaf=missing, inner_hashes=tuple(inner))


# ---------------------------------------------------------------------------------------
