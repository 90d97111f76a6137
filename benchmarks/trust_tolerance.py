"""Tolerance-mode spoofing (docs/PROTOCOL.md §10.5), measured through the real checks: a miner that
claims a hardware class nobody holds is checked by every validator within δ instead of bit for
bit. It runs the `lazy` cheat on 1 of n segments (its faked leaf holds extrapolated parameters,
the segment start's moments and made-up losses); each validator challenges q segments
(`make_challenge`, seeded by its own signature) and checks them in tolerance mode
(`verify_submission(..., mode="tolerance")`, `judge`). The miner scores 0 when the validators that
find fraud hold at least half of the (equal) stake, as `trust.p_majority_catches` prices it.

`verify_submission` is a pure function of the submission and the challenged segments: each
distinct challenge is checked once and its verdict reused across rounds, so thousands of rounds
cost n replays.
"""

from __future__ import annotations

import functools

from benchmarks.trust import Params


def measure_spoofing(p: Params, trials: int) -> float:
    """Share of `trials` rounds in which at least half of p.validators tolerance checkers find
    the lazy miner's faked segment."""
    from benchmarks.overhead import corpus_slice
    from protocol.core.crypto.hashing import blake3_hash, u64
    from protocol.core.crypto.signing import NodeIdentity
    from protocol.core.hardware.observe import observe_profile
    from protocol.core.hardware.replay_profile import ReplayProfile
    from protocol.core.model.gpt import build_model, init_params, preset
    from protocol.core.proof.challenge import make_challenge
    from protocol.core.proof.trace import zero_carry_hash
    from protocol.core.proof.verdict import judge, verify_submission
    from protocol.core.train.compute_config import ComputeConfig
    from protocol.core.train.training import RoundTask
    from protocol.devnet.cheats import lazy
    from protocol.node.profile_setup import apply_profile

    profile = ReplayProfile(threads=1, cpu_capability=observe_profile().cpu_capability)
    apply_profile(profile)
    ds, cfg = corpus_slice(600_000), ComputeConfig(segments_per_validator=p.q)
    assert cfg.n_segments == p.n_segments
    theta, model, carry0 = init_params(preset("micro"), 0), build_model(preset("micro")), zero_carry_hash(preset("micro"))
    task = RoundTask(b"trust-spoof", 1, b"\x5a" * 20, preset("micro"), cfg)
    sub = lazy(task, ds, theta, None, 1 / p.n_segments)

    @functools.cache
    def finds(segments: tuple[int, ...]) -> bool:  # one validator's tolerance check of its challenge
        v = verify_submission(task, ds, theta, carry0, sub.root, sub.trace, sub.blob,
                              lambda leaf: sub.fetch(leaf, task), segments, profile, mode="tolerance", model=model)
        return judge(v).kind is not None

    caught = 0
    for i in range(trials):
        block = blake3_hash("trust-spoof-block", u64(i))
        finders = sum(finds(make_challenge(NodeIdentity(blake3_hash("trust-spoof-validator", u64(i), u64(j))), 1,
                                           task.miner, block, cfg).segments) for j in range(p.validators))
        caught += 2 * (p.validators - finders) <= p.validators  # no score above 0 keeps a strict majority
    return caught / trials
