from __future__ import annotations

import dataclasses
import itertools

import pytest
import torch
from conftest import ft

from protocol.core.crypto.hashing import blake3_hash
from protocol.core.model.gpt import GPT
from protocol.core.train.compute_config import ComputeConfig
from protocol.devnet import cheats as adv
from validator.scoring import (
    MAX_SCORE,
    DecodedUpdate,
    GauntletUsefulness,
    OverlapCosineCopies,
    RoundEntry,
    ZeroReason,
    absolute_score,
    decode_for_scoring,
    exact_norm,
    over_norm,
    score_round,
    score_seed,
    usefulness_of,
)


def _decoded(honest_runs):  # type: ignore[no-untyped-def]
    t = ft.task(0)
    out = [decode_for_scoring(t.miner if i == 0 else ft.miner(i), i, s.blob, t.model, t.cfg)
           for i, s in enumerate(honest_runs)]
    assert all(u is not None for u in out)
    return out


def test_honest_updates_are_not_copies(honest_runs) -> None:  # type: ignore[no-untyped-def]
    ups = _decoded(honest_runs)
    det = OverlapCosineCopies()
    assert det.find_copies(ups) == []
    stats = []
    for a, b in itertools.combinations(ups, 2):
        jac = float((a.mask & b.mask).sum() / (a.mask | b.mask).sum())
        cos = float(torch.nn.functional.cosine_similarity(a.dense, b.dense, dim=0))
        stats.append((jac, cos))
    assert max(j for j, _ in stats) < det.overlap and max(c for _, c in stats) < det.cosine


def test_copies_lose_to_the_earlier_commit(honest_runs) -> None:  # type: ignore[no-untyped-def]
    t = ft.task(0)
    ups = _decoded(honest_runs[:3])
    original = ups[1]
    perturbed = decode_for_scoring(b"\xcc" * 20, 10, adv.perturb_blob(t, honest_runs[1].blob, 0.05),
                                   t.model, t.cfg)
    exact = DecodedUpdate(b"\xdd" * 20, 11, original.dense.clone(), original.mask.clone())
    early = DecodedUpdate(b"\xee" * 20, -1, original.dense.clone(), original.mask.clone())
    assert perturbed is not None
    found = {c.copier: c for c in OverlapCosineCopies().find_copies([*ups, perturbed, exact])}
    assert set(found) == {b"\xcc" * 20, b"\xdd" * 20}
    assert found[b"\xcc" * 20].original == original.miner and found[b"\xcc" * 20].overlap == 1.0
    # whoever committed first keeps the score, even if listed later
    found = OverlapCosineCopies().find_copies([original, early])
    assert [c.copier for c in found] == [original.miner]


def test_nan_and_over_norm_guards(honest_runs) -> None:  # type: ignore[no-untyped-def]
    t = ft.task(0)
    blob = honest_runs[0].blob
    assert decode_for_scoring(t.miner, 0, adv.nan_blob(t, blob), t.model, t.cfg) is None
    assert decode_for_scoring(t.miner, 0, b"garbage", t.model, t.cfg) is None
    ups = _decoded(honest_runs[:6])
    big = decode_for_scoring(b"\xbb" * 20, 9, adv.scale_blob(t, blob, 100.0), t.model, t.cfg)
    assert big is not None
    steps = {u.miner: t.cfg.inner_steps for u in [*ups, big]}
    reference = exact_norm(ups[0].dense) / t.cfg.inner_steps  # a state's norm per step
    assert over_norm([*ups, big], steps, reference, 5.0) == {b"\xbb" * 20}
    assert over_norm(ups, steps, reference, 5.0) == set()
    assert over_norm([*ups, big], steps, None, 5.0) == set()  # genesis: no reference yet


def test_gauntlet_soft_factor_never_zeroes(honest_runs, ds, theta) -> None:  # type: ignore[no-untyped-def]
    from protocol.core.train.data import heldout_batches
    from validator.scoring import mean_loss, own_batches

    t = ft.task(0)
    u = _decoded(honest_runs[:1])[0]
    model = GPT(t.model)
    held = heldout_batches(ds, b"seed", 8, 4, t.model.block_size)
    own = own_batches(ds, t, b"seed", 8)
    before = mean_loss(model, theta, held)
    strict = GauntletUsefulness(margin=-10.0, soft_factor=0.5)  # own gain always "trails"
    r = strict.evaluate(model, theta, u.dense, own, held, before)
    assert r.factor == 0.5 and r.value == max(0.0, r.heldout_gain) * 0.5
    r1 = GauntletUsefulness().evaluate(model, theta, u.dense, own, held, before)
    assert r1.heldout_gain > 0 and r1.own_gain > 0 and r1.value > 0


def test_absolute_scores_cap_quality_then_count_steps() -> None:
    cfg = ComputeConfig(inner_steps=30, checkpoint_every=3, score_full_gain=0.05)
    assert absolute_score(0.05, 30, cfg) == MAX_SCORE == absolute_score(0.5, 30, cfg)  # capped
    assert absolute_score(0.025, 30, cfg) == MAX_SCORE // 2
    assert absolute_score(-0.1, 30, cfg) == 0
    short = cfg.with_steps(9)
    assert short.full_steps == 30 and absolute_score(0.05, 9, short) == MAX_SCORE * 9 // 30
    # rounding down: ten 3-step identities at the cap never beat one 30-step one
    assert 10 * absolute_score(1.0, 3, cfg.with_steps(3)) <= absolute_score(1.0, 30, cfg)
    assert ZeroReason.COPY == "copy"


@pytest.mark.parametrize("failed", [0, 1, 2])
def test_usefulness_computed_ahead_of_verdicts_gives_the_same_scores(honest_runs, ds, theta, failed) -> None:  # type: ignore[no-untyped-def]
    """Validators evaluate usefulness while checkpoints arrive, before any proof verdict;
    the verdicts then zero miners, and the scores must equal scoring after the verdicts."""
    seed = blake3_hash("validator-seed", b"v0")
    t0 = ft.task(0)
    blobs = [(ft.task(i), s.blob) for i, s in enumerate(honest_runs[:4])]
    blobs.append((ft.task(40), honest_runs[0].blob))  # a later copy of miner 0
    blobs.append((ft.task(41), adv.nan_blob(t0, honest_runs[2].blob)))
    rows = [RoundEntry(t, i, blob, i != failed) for i, (t, blob) in enumerate(blobs)]
    ahead = usefulness_of([dataclasses.replace(r, proof_ok=True) for r in rows], ds, theta, seed)
    assert ft.task(failed).miner in ahead  # evaluated before its proof failed
    after = score_round(rows, ds, theta, seed)
    early = score_round(rows, ds, theta, seed, useful=ahead)
    assert {m: (s.score, s.zero_reason) for m, s in early.items()} == \
        {m: (s.score, s.zero_reason) for m, s in after.items()}
    assert early[ft.task(failed).miner].zero_reason is ZeroReason.PROOF
    copier = early[ft.task(40).miner]
    assert (copier.zero_reason is ZeroReason.COPY) == (failed != 0)  # a failed original loses its claim


def test_the_score_seed_is_public_and_shared_by_every_validator_of_a_round(honest_runs, ds, theta) -> None:  # type: ignore[no-untyped-def]
    """Anyone recomputes a revealed score from chain data (the round's seed block); every validator
    draws the same batches, so two validators' scores of an honest update are bit-identical, and
    another round draws other batches."""
    block, other_block = b"\x01" * 32, b"\x02" * 32
    assert score_seed(block) != score_seed(other_block)
    t = ft.task(0)
    entries = [RoundEntry(t, 0, honest_runs[0].blob, True)]
    first = score_round(entries, ds, theta, score_seed(block))[t.miner]
    again = score_round(entries, ds, theta, score_seed(block))[t.miner]
    later = score_round(entries, ds, theta, score_seed(other_block))[t.miner]
    assert first.usefulness is not None and later.usefulness is not None and first.usefulness.value > 0
    assert (first.score, first.usefulness) == (again.score, again.usefulness)
    # the seed decides the held-out batches: another round measures the same update elsewhere
    assert first.usefulness.heldout_before != later.usefulness.heldout_before
