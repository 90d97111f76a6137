"""Issue 3's adversaries: each is caught (zero score + report-grade evidence); honest never is."""

from __future__ import annotations

import dataclasses

import pytest
from conftest import N_HONEST, ft
from validator_helpers import check, scores

from protocol.core.crypto.signing import NodeIdentity
from protocol.core.hardware.replay_profile import ProfileMismatch
from protocol.core.proof.challenge import make_challenge
from protocol.core.proof.replay import ReplayStatus
from protocol.core.proof.submission import honest, submit
from protocol.core.proof.verdict import verify_submission
from protocol.core.settlement.fraud import FraudKind
from protocol.devnet import cheats as adv
from validator.scoring import ZeroReason

CHEAT = 40  # miner index used by cheaters (disjoint from the honest 0..19)


def _caught(sub, t, ds, theta, profile, kind, honest_runs, segments=None):  # type: ignore[no-untyped-def]
    """Assert a `kind` report and a zero score among five honest miners."""
    v, j = check(sub, t, ds, theta, profile, segments)
    assert j.kind is kind, j
    entries = [(h, ft.task(i), True) for i, h in enumerate(honest_runs[:5])]
    entries.append((sub, t, j.kind is None))
    s = scores(entries, ds, theta)[t.miner]
    assert s.score == 0 and s.zero_reason is ZeroReason.PROOF
    return v, j


def test_honest_miners_are_never_flagged(honest_runs, ds, theta, profile) -> None:  # type: ignore[no-untyped-def]
    assert len(honest_runs) >= 20
    for i, sub in enumerate(honest_runs):
        v, j = check(sub, ft.task(i), ds, theta, profile)  # every segment replayed
        assert j.kind is None and not j.tolerated, (i, j)
        assert all(r.status is ReplayStatus.MATCH for r in v.replays)
    result = scores([(s, ft.task(i), True) for i, s in enumerate(honest_runs)], ds, theta)
    assert all(s.zero_reason is None for s in result.values())
    assert sum(s.score > 0 for s in result.values()) >= N_HONEST // 2


@pytest.mark.parametrize("fraction", [0.34, 1.0])
def test_1_lazy_interpolating_miner(honest_runs, ds, theta, profile, fraction) -> None:  # type: ignore[no-untyped-def]
    t = ft.task(CHEAT)
    sub = adv.lazy(t, ds, theta, None, fraction)
    faked = adv.faked_segments(t, fraction)
    v, j = _caught(sub, t, ds, theta, profile, FraudKind.REPLAY, honest_runs)
    assert j.segment in faked and j.leaf == j.segment + 1
    bad = {r.segment for r in v.replays if r.status is ReplayStatus.MISMATCH}
    assert bad == set(faked)
    # a validator whose q=1 challenge lands on a faked segment catches it on its own
    hits = 0
    for n in range(12):
        ch = make_challenge(NodeIdentity(bytes([n]) * 32), 1, t.miner, b"\x42" * 32, t.cfg)
        _, jn = check(sub, t, ds, theta, profile, ch.segments)
        assert (jn.kind is FraudKind.REPLAY) == (ch.segments[0] in faked)
        hits += jn.kind is FraudKind.REPLAY
    assert hits > 0


def test_2_fabricated_checkpoint(honest_runs, ds, theta, profile) -> None:  # type: ignore[no-untyped-def]
    t = ft.task(CHEAT)
    sub = adv.fabricate(t, ds, theta, None, leaf=2)
    v, j = _caught(sub, t, ds, theta, profile, FraudKind.REPLAY, honest_runs)
    assert j.segment == 1
    mism = next(r for r in v.replays if r.segment == 1)
    assert mism.expected_hash != mism.actual_hash and mism.max_abs_err > 0.01


@pytest.mark.parametrize("cheat", [adv.wrong_data, adv.small_batch])
def test_3_4_wrong_pages_or_smaller_batch(honest_runs, ds, theta, profile, cheat) -> None:  # type: ignore[no-untyped-def]
    t = ft.task(CHEAT)
    sub = cheat(t, ds, theta, None)
    v, _ = _caught(sub, t, ds, theta, profile, FraudKind.REPLAY, honest_runs)
    assert all(r.status is ReplayStatus.MISMATCH for r in v.replays)  # any q=1 challenge hits


def test_5_update_not_derived_from_final_checkpoint(honest_runs, ds, theta, profile) -> None:  # type: ignore[no-untyped-def]
    t = ft.task(CHEAT)
    from protocol.core.proof.work import build_work
    from protocol.core.train.training import train_round

    work = build_work(t, train_round(t, ds, theta, None), theta)
    sub = submit(t, work, blob=adv.not_derived(t, work))
    v, j = _caught(sub, t, ds, theta, profile, FraudKind.DERIVATION, honest_runs, [0])
    assert v.derivation is not None and "update-bytes" in v.derivation.failures


def _blob_cheat(honest_runs, ds, theta, profile, blob):  # type: ignore[no-untyped-def]
    t = ft.task(CHEAT)
    sub = dataclasses.replace(honest(t, ds, theta, None), blob=blob(t))
    v, _ = _caught(sub, t, ds, theta, profile, FraudKind.DERIVATION, honest_runs, [0])
    assert v.derivation is not None and v.derivation.failures == ("update-bytes",)
    return sub


def test_6_copied_update_and_perturbed_copy(honest_runs, ds, theta, profile) -> None:  # type: ignore[no-untyped-def]
    victim = honest_runs[0].blob
    _blob_cheat(honest_runs, ds, theta, profile, lambda t: victim)
    _blob_cheat(honest_runs, ds, theta, profile, lambda t: adv.perturb_blob(t, victim, 0.01))


def test_7_stale_update_from_earlier_round(honest_runs, ds, theta, profile) -> None:  # type: ignore[no-untyped-def]
    t1 = ft.task(CHEAT, round_=1)
    old = honest(t1, ds, theta, None)
    t2 = ft.task(CHEAT, round_=2)
    fresh = honest(t2, ds, theta, adv.carry_of(old))
    sub = dataclasses.replace(fresh, blob=old.blob)
    v, j = check(sub, t2, ds, theta, profile, [0], carry_in_hash=old.trace.carry_hash)
    assert j.kind is FraudKind.DERIVATION and v.derivation is not None
    assert v.derivation.failures == ("update-bytes",)
    _, ok = check(fresh, t2, ds, theta, profile, [0], carry_in_hash=old.trace.carry_hash)
    assert ok.kind is None  # the honest round-2 work with the carried residual passes
    assert fresh.checkpoints[0].warm and not old.checkpoints[0].warm  # and a carried moment


@pytest.mark.parametrize("edit", [adv.scale_blob, adv.sign_flip_blob, adv.nan_blob, adv.noise_blob])
def test_8_to_11_scaled_flipped_nan_noise(honest_runs, ds, theta, profile, edit) -> None:  # type: ignore[no-untyped-def]
    _blob_cheat(honest_runs, ds, theta, profile, lambda t: edit(t, honest(t, ds, theta, None).blob))


def test_12_wrong_base_model(honest_runs, ds, theta, profile) -> None:  # type: ignore[no-untyped-def]
    t = ft.task(CHEAT)
    v, _ = _caught(adv.wrong_base(t, ds, theta, None), t, ds, theta, profile,
                   FraudKind.DERIVATION, honest_runs, [0])
    assert v.derivation is not None and "leaf0-state" in v.derivation.failures
    assert v.derivation.leaf0_expected != v.derivation.leaf0_committed


def test_13_mismatched_profile_is_not_fraud(honest_runs, ds, theta, profile) -> None:  # type: ignore[no-untyped-def]
    t, sub = ft.task(0), honest_runs[0]
    wrong = dataclasses.replace(profile, threads=profile.threads + 1)
    with pytest.raises(ProfileMismatch) as info:
        verify_submission(t, ds, theta, b"", sub.root, sub.trace, sub.blob,
                          lambda i: sub.fetch(i, t), [0], wrong)
    assert "threads" in info.value.differences


def test_14_injected_error_feedback_buffer(honest_runs, ds, theta, profile) -> None:  # type: ignore[no-untyped-def]
    t = ft.task(CHEAT)
    v, _ = _caught(adv.ef_inject(t, ds, theta, None), t, ds, theta, profile,
                   FraudKind.DERIVATION, honest_runs, [0])
    assert v.derivation is not None and "carry-in" in v.derivation.failures


@pytest.mark.parametrize("scale", [1e-12, 1e3])
def test_14b_injected_second_moment(honest_runs, ds, theta, profile, scale) -> None:  # type: ignore[no-untyped-def]
    # a tiny second moment makes every AdamW step huge, a large one freezes training
    t = ft.task(CHEAT)
    v, _ = _caught(adv.moment_inject(t, ds, theta, None, scale), t, ds, theta, profile,
                   FraudKind.DERIVATION, honest_runs, [0])
    assert v.derivation is not None and "carry-in" in v.derivation.failures


def test_15_withheld_checkpoints_give_unavailability_evidence(honest_runs, ds, theta, profile) -> None:  # type: ignore[no-untyped-def]
    t = ft.task(CHEAT)
    sub = adv.withhold(t, ds, theta, None, fraction=0.34)
    faked = adv.faked_segments(t, 0.34)
    _, j = check(sub, t, ds, theta, profile, faked)
    assert j.kind is FraudKind.UNAVAILABLE and j.leaf in sub.withheld
    entries = [(h, ft.task(i), True) for i, h in enumerate(honest_runs[:5])] + [(sub, t, False)]
    assert scores(entries, ds, theta)[t.miner].score == 0
    # once served (a voter fetches it), the faked segment replays as a mismatch
    served = dataclasses.replace(sub, withheld=frozenset())
    _, j2 = check(served, t, ds, theta, profile, faked)
    assert j2.kind is FraudKind.REPLAY
