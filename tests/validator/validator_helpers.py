"""The validator pipeline as tests use it: proof evidence, then scores."""

from __future__ import annotations

from collections.abc import Sequence

from protocol.core.crypto.hashing import blake3_hash
from protocol.core.hardware.replay_profile import ReplayProfile
from protocol.core.model.gpt import Params
from protocol.core.proof.submission import Submission
from protocol.core.proof.trace import zero_carry_hash
from protocol.core.proof.verdict import Judgement, Verification, judge, verify_submission
from protocol.core.train.data import Dataset
from protocol.core.train.training import RoundTask
from validator.scoring import MinerScore, RoundEntry, score_round


def check(sub: Submission, t: RoundTask, ds: Dataset, theta: Params, profile: ReplayProfile,
          segments: Sequence[int] | None = None, carry_in_hash: bytes | None = None,
          ) -> tuple[Verification, Judgement]:
    segs = range(t.cfg.n_segments) if segments is None else segments
    carry_in = carry_in_hash if carry_in_hash is not None else zero_carry_hash(t.model)
    v = verify_submission(t, ds, theta, carry_in, sub.root, sub.trace, sub.blob,
                          lambda i: sub.fetch(i, t), list(segs), profile)
    return v, judge(v)


def scores(entries: Sequence[tuple[Submission, RoundTask, bool]], ds: Dataset,
           theta: Params) -> dict[bytes, MinerScore]:
    rows = [RoundEntry(t, i, s.blob, ok) for i, (s, t, ok) in enumerate(entries)]
    return score_round(rows, ds, theta, blake3_hash("validator-seed", b"v0"))
