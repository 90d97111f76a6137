"""One validator's proof check of one miner, and the decision it supports.

`verify_submission` gathers evidence (trace, leaf 0, derivation, the challenged replays) from
bytes the miner served; `judge` decides, separately, whether that evidence supports a
`replay`, `derivation` or `unavailable` report (docs/PROTOCOL.md §10). Both are pure; fetching is
passed in as a function, so the I/O shell decides about timeouts and peers.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from protocol.core.hardware.observe import check_profile
from protocol.core.hardware.replay_profile import ReplayProfile
from protocol.core.model.gpt import LanguageModel, Params, build_model
from protocol.core.proof.derivation import DerivationResult, verify_update_derivation
from protocol.core.proof.replay import ReplayResult, ReplayStatus, replay_segment
from protocol.core.proof.trace import Trace, TraceError, check_trace
from protocol.core.settlement.fraud import FraudKind
from protocol.core.train.data import Dataset
from protocol.core.train.training import RoundTask, Stepper

Fetch = Callable[[int], bytes | None]  # leaf index -> checkpoint bytes, None if not served


@dataclass(frozen=True)
class Verification:
    trace_error: str | None  # set when the served trace does not match the committed root
    derivation: DerivationResult | None
    replays: tuple[ReplayResult, ...]


@dataclass(frozen=True)
class Judgement:
    kind: FraudKind | None  # None: the proof holds (the miner may still be useless)
    leaf: int | None  # the leaf the report is about (segment end, missing leaf, or 0)
    segment: int | None  # the replayed segment, for `replay` reports
    tolerated: bool  # accepted only under tolerance mode: flagged in the score
    detail: str


def verify_submission(task: RoundTask, ds: Dataset, theta_r: Params, carry_in_hash: bytes,
                      root: bytes, trace: Trace | None, blob: bytes, fetch: Fetch,
                      segments: Sequence[int], profile: ReplayProfile, mode: str = "exact",
                      model: LanguageModel | None = None, stepper: Stepper | None = None) -> Verification:
    """All checks a validator makes on one miner. Raises ProfileMismatch before any work.
    `stepper`: how the challenged segments are replayed (`proof.replay_segment`)."""
    check_profile(profile)
    if trace is None:
        return Verification("trace not served", None, ())
    try:
        check_trace(trace, root, task.cfg)
    except TraceError as exc:
        return Verification(str(exc), None, ())
    last = len(trace.checkpoint_hashes) - 1
    # each leaf is fetched when its check decodes it, so one served checkpoint is in memory at a time
    derivation = verify_update_derivation(task, trace, theta_r, carry_in_hash, lambda: fetch(0),
                                          lambda: fetch(last), blob)
    if stepper is None:
        model = model if model is not None else build_model(task.model)
    replays = tuple(
        replay_segment(task, ds, trace, s, functools.partial(fetch, s), functools.partial(fetch, s + 1), profile,
                       mode, model, stepper)
        for s in segments
    )
    return Verification(None, derivation, replays)


def judge(v: Verification) -> Judgement:
    """Strongest report the evidence supports: derivation, then replay, then unavailable."""
    if v.trace_error is not None:
        return Judgement(FraudKind.UNAVAILABLE, None, None, False, v.trace_error)
    d = v.derivation
    if d is not None and d.failures:
        return Judgement(FraudKind.DERIVATION, 0, None, False, ", ".join(d.failures))
    for r in v.replays:
        if r.status is ReplayStatus.MISMATCH:
            return Judgement(FraudKind.REPLAY, r.end_leaf, r.segment, False,
                             f"segment {r.segment}: rel_err {r.rel_err:.3g}")
    missing = [r.missing_leaf for r in v.replays if r.status is ReplayStatus.UNAVAILABLE]
    if d is not None and d.missing_leaf is not None:
        missing.insert(0, d.missing_leaf)
    if missing:
        return Judgement(FraudKind.UNAVAILABLE, missing[0], None, False,
                         f"checkpoint leaf {missing[0]} not served")
    tolerated = any(r.status is ReplayStatus.TOLERATED for r in v.replays)
    return Judgement(None, None, None, tolerated, "proof holds")
