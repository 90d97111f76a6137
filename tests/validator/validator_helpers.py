"""The validator pipeline as tests use it: proof evidence, then scores."""

from __future__ import annotations

from collections.abc import Sequence

from protocol.adversaries import Submission
from protocol.data import Dataset
from protocol.hashing import blake3_hash
from protocol.model import Params, num_params
from protocol.proof import zero_residual_hash
from protocol.replay_profile import ReplayProfile
from protocol.training import RoundTask
from protocol.verdict import Judgement, Verification, judge, verify_submission
from validator.scoring import MinerScore, RoundEntry, score_round


def check(sub: Submission, t: RoundTask, ds: Dataset, theta: Params, profile: ReplayProfile,
          segments: Sequence[int] | None = None, ef_hash: bytes | None = None,
          ) -> tuple[Verification, Judgement]:
    segs = range(t.cfg.n_segments) if segments is None else segments
    ef = ef_hash if ef_hash is not None else zero_residual_hash(num_params(t.model))
    v = verify_submission(t, ds, theta, ef, sub.root, sub.trace, sub.blob,
                          lambda i: sub.fetch(i, t), list(segs), profile)
    return v, judge(v)


def scores(entries: Sequence[tuple[Submission, RoundTask, bool]], ds: Dataset,
           theta: Params) -> dict[bytes, MinerScore]:
    rows = [RoundEntry(t, i, s.blob, ok) for i, (s, t, ok) in enumerate(entries)]
    return score_round(rows, ds, theta, blake3_hash("validator-seed", b"v0"))
