"""Proof of replay (docs/PROTOCOL.md §15): inner-step hashes, replay witnesses, audit picks."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from fixtures_training import MICRO, SMALL_CFG, task
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.core.checkpoint.format import Checkpoint, checkpoint_hash, encode_checkpoint
from protocol.core.crypto.signing import NodeIdentity
from protocol.core.errors import ConfigError, SignatureError
from protocol.core.hardware.replay_profile import ReplayProfile
from protocol.core.model.gpt import Params
from protocol.core.proof.challenge import make_challenge
from protocol.core.proof.replay import ReplayStatus, replay_segment
from protocol.core.proof.submission import Submission
from protocol.core.proof.witness import (
    NO_WITNESS,
    WitnessError,
    audit_picks,
    audit_segment,
    audit_segments,
    make_audit_seed,
    replay_witness,
    verify_audit_seed,
    witness_for,
)
from protocol.core.train.compute_config import ComputeConfig
from protocol.core.train.data import Dataset
from protocol.core.train.training import train_round
from protocol.devnet import cheats as adv

V, M, SIG = b"\x0a" * 20, b"\x0b" * 20, b"\x5a" * 64
HASHES = tuple(bytes([i]) * 32 for i in range(1, 4))
K = SMALL_CFG.checkpoint_every


def _clone(c: Checkpoint) -> Checkpoint:
    copy = {k: {n: t.clone() for n, t in d.items()} for k, d in
            (("params", c.params), ("exp_avg", c.exp_avg), ("exp_avg_sq", c.exp_avg_sq))}
    return dataclasses.replace(c, rng=c.rng.clone(), **copy)


@pytest.fixture(scope="module")
def training_states(honest_sub: Submission, ds: Dataset, theta: Params) -> list[Checkpoint]:
    """The states miner 0's honest training passes through, after each of its H steps."""
    states: list[Checkpoint] = []
    again = train_round(task(0), ds, theta, None, on_step=lambda s: states.append(_clone(s)))
    assert tuple(checkpoint_hash(c, MICRO) for c in again.checkpoints) == \
        honest_sub.trace.checkpoint_hashes  # the hook does not perturb training
    return states


# ---------------------------------------------------------------------------------------
# inner hashes


def test_replay_returns_the_hash_of_every_state_training_passed_through(
        honest_sub: Submission, ds: Dataset, profile: ReplayProfile,
        training_states: list[Checkpoint]) -> None:
    t0 = task(0)
    assert len(training_states) == SMALL_CFG.inner_steps
    assert [s.step for s in training_states] == list(range(1, SMALL_CFG.inner_steps + 1))
    trained = [checkpoint_hash(s, MICRO) for s in training_states]
    assert len(set(trained)) == len(trained)  # every step moves the state
    for seg in range(SMALL_CFG.n_segments):
        r = replay_segment(t0, ds, honest_sub.trace, seg, honest_sub.fetch(seg, t0),
                           honest_sub.fetch(seg + 1, t0), profile)
        assert r.status is ReplayStatus.MATCH
        assert r.inner_hashes == tuple(trained[seg * K : (seg + 1) * K])
        assert r.inner_hashes[-1] == r.actual_hash == honest_sub.trace.checkpoint_hashes[seg + 1]


def test_an_unserved_start_has_no_inner_hashes(honest_sub: Submission, ds: Dataset,
                                               profile: ReplayProfile) -> None:
    r = replay_segment(task(0), ds, honest_sub.trace, 1, None, None, profile)
    assert r.status is ReplayStatus.UNAVAILABLE and r.inner_hashes == ()
    assert witness_for(V, SIG, 1, M, [r]) == NO_WITNESS


def _nudged_start(sub: Submission, seg: int) -> tuple[Submission, bytes]:
    """The trace with leaf `seg` replaced by a start one ulp away in one weight."""
    start = sub.checkpoints[seg]
    params = dict(start.params)
    w = params["ln_f.weight"].clone()
    w[0] = torch.nextafter(w[0], torch.tensor(10.0))
    fake = dataclasses.replace(start, params=params | {"ln_f.weight": w})
    hashes = list(sub.trace.checkpoint_hashes)
    hashes[seg] = checkpoint_hash(fake, MICRO)
    trace = dataclasses.replace(sub.trace, checkpoint_hashes=tuple(hashes))
    return dataclasses.replace(sub, trace=trace), encode_checkpoint(fake, MICRO)


def test_a_witness_from_a_faked_start_differs(honest_sub: Submission, ds: Dataset,
                                              profile: ReplayProfile) -> None:
    t0, seg = task(0), 1
    honest = replay_segment(t0, ds, honest_sub.trace, seg, honest_sub.fetch(seg, t0), None, profile)
    faked_sub, fake_start = _nudged_start(honest_sub, seg)
    faked = replay_segment(t0, ds, faked_sub.trace, seg, fake_start, None, profile)
    assert faked.inner_hashes and all(a != b for a, b in zip(faked.inner_hashes, honest.inner_hashes, strict=True))
    assert replay_witness(V, SIG, 1, M, seg, faked.inner_hashes) != \
        replay_witness(V, SIG, 1, M, seg, honest.inner_hashes)
    # a lazy validator knows only the committed end leaf: guessing the other states fails
    guessed = (bytes(32),) * (K - 1) + (honest_sub.trace.checkpoint_hashes[seg + 1],)
    assert replay_witness(V, SIG, 1, M, seg, guessed) != \
        replay_witness(V, SIG, 1, M, seg, honest.inner_hashes)


def test_a_faked_miner_segment_gets_no_witness(ds: Dataset, theta: Params,
                                               profile: ReplayProfile) -> None:
    t = task(5)
    sub = adv.lazy(t, ds, theta, None, 1.0)  # every segment extrapolated
    r = replay_segment(t, ds, sub.trace, 0, sub.fetch(0, t), sub.fetch(1, t), profile)
    assert r.status is ReplayStatus.MISMATCH and len(r.inner_hashes) == K
    assert witness_for(V, SIG, 1, t.miner, [r]) == NO_WITNESS


# ---------------------------------------------------------------------------------------
# the witness


def test_witness_binds_every_field() -> None:
    w = replay_witness(V, SIG, 7, M, 2, HASHES)
    assert len(w) == 32 and w != NO_WITNESS and w == replay_witness(V, SIG, 7, M, 2, list(HASHES))
    variants = [
        replay_witness(b"\x0c" * 20, SIG, 7, M, 2, HASHES),
        replay_witness(V, b"\x5b" + SIG[1:], 7, M, 2, HASHES),
        replay_witness(V, SIG, 8, M, 2, HASHES),
        replay_witness(V, SIG, 7, b"\x0c" * 20, 2, HASHES),
        replay_witness(V, SIG, 7, M, 3, HASHES),
        replay_witness(V, SIG, 7, M, [2], HASHES[1:] + HASHES[:1]),  # order of states
        replay_witness(V, SIG, 7, M, 2, HASHES[:2] + (b"\xff" * 32,)),
        replay_witness(V, SIG, 7, M, 2, HASHES[:2]),
        replay_witness(M, SIG, 7, V, 2, HASHES),  # validator and miner swapped
    ]
    assert len({w, *variants}) == len(variants) + 1
    assert replay_witness(V, SIG, 7, M, [2], HASHES) == w  # one segment, either spelling


def test_witness_covers_all_challenged_segments() -> None:
    six = HASHES + tuple(bytes([9, i]) * 16 for i in range(3))
    both = replay_witness(V, SIG, 1, M, [0, 4], six)
    assert both != replay_witness(V, SIG, 1, M, [0, 4], six[3:] + six[:3])
    assert both != replay_witness(V, SIG, 1, M, [0], six)  # a segment count is bound too
    with pytest.raises(WitnessError):
        replay_witness(V, SIG, 1, M, [0, 4], six[:5])  # not k per segment


@pytest.mark.parametrize("args", [
    (b"\x0a" * 19, SIG, 1, M, 0, HASHES), (V, SIG, 1, M + b"\x00", 0, HASHES),
    (V, SIG[:63], 1, M, 0, HASHES), (V, SIG, -1, M, 0, HASHES), (V, SIG, 1, M, -1, HASHES),
    (V, SIG, 1, M, [], HASHES), (V, SIG, 1, M, 0, ()), (V, SIG, 1, M, 0, (b"\x01" * 31,)),
])
def test_malformed_witness_inputs_raise(args: tuple) -> None:  # type: ignore[type-arg]
    with pytest.raises(WitnessError):
        replay_witness(*args)


@settings(max_examples=60, deadline=None)
@given(st.tuples(st.binary(min_size=20, max_size=20), st.binary(min_size=64, max_size=64),
                 st.integers(0, 2**64 - 1), st.binary(min_size=20, max_size=20),
                 st.integers(0, 99), st.lists(st.binary(min_size=32, max_size=32), min_size=1,
                                              max_size=4)),
       st.data())
def test_any_changed_field_changes_the_witness(fields: tuple, data: st.DataObject) -> None:  # type: ignore[type-arg]
    v, sig, r, m, seg, hs = fields
    i = data.draw(st.integers(0, 5))
    changed = list(fields)
    changed[i] = data.draw({0: st.binary(min_size=20, max_size=20),
                            1: st.binary(min_size=64, max_size=64), 2: st.integers(0, 2**64 - 1),
                            3: st.binary(min_size=20, max_size=20), 4: st.integers(0, 99),
                            5: st.lists(st.binary(min_size=32, max_size=32), min_size=1,
                                        max_size=4)}[i].filter(lambda x: x != fields[i]))
    assert replay_witness(v, sig, r, m, seg, hs) != replay_witness(*changed)


def test_witness_for_an_accepted_replay(honest_sub: Submission, ds: Dataset,
                                        profile: ReplayProfile) -> None:
    t0 = task(0)
    r = replay_segment(t0, ds, honest_sub.trace, 2, honest_sub.fetch(2, t0),
                       honest_sub.fetch(3, t0), profile)
    assert witness_for(V, SIG, 1, t0.miner, [r]) == replay_witness(V, SIG, 1, t0.miner, 2,
                                                                   r.inner_hashes)
    # an unserved end leaf fails the check (an unavailability report), so no witness either
    withheld = replay_segment(t0, ds, honest_sub.trace, 2, honest_sub.fetch(2, t0), None, profile)
    assert withheld.status is ReplayStatus.UNAVAILABLE and withheld.inner_hashes == r.inner_hashes
    assert witness_for(V, SIG, 1, t0.miner, [withheld]) == NO_WITNESS
    assert witness_for(V, SIG, 1, t0.miner, []) == NO_WITNESS


# ---------------------------------------------------------------------------------------
# audits


def test_audit_segment_is_the_challenged_segment() -> None:
    for i in range(12):
        ch = make_challenge(NodeIdentity(bytes([i + 1]) * 32), 3, M, b"\x44" * 32, ComputeConfig())
        assert audit_segment(ch.signature, ComputeConfig()) == ch.segments[0]
    q2 = ComputeConfig(segments_per_validator=2)
    ch = make_challenge(NodeIdentity(b"\x01" * 32), 3, M, b"\x44" * 32, q2)
    assert audit_segments(ch.signature, q2) == ch.segments and len(ch.segments) == 2
    with pytest.raises(ConfigError):
        audit_segment(ch.signature, q2)


def test_audit_seed_is_the_auditors_signature_over_round_and_block() -> None:
    a = NodeIdentity(b"\x21" * 32)
    seed = make_audit_seed(a, 4, b"\x77" * 32)
    assert len(seed) == 64 and seed == make_audit_seed(a, 4, b"\x77" * 32)
    verify_audit_seed(a.public_key, 4, b"\x77" * 32, seed)
    assert len({seed, make_audit_seed(a, 5, b"\x77" * 32), make_audit_seed(a, 4, b"\x78" * 32),
                make_audit_seed(NodeIdentity(b"\x22" * 32), 4, b"\x77" * 32)}) == 4
    with pytest.raises(SignatureError):
        verify_audit_seed(a.public_key, 5, b"\x77" * 32, seed)


def _addr(i: int) -> str:
    return "0x" + f"{i:02x}" * 19 + "Ab"


REVEALS = {_addr(v): [_addr(16 + m) for m in range(n)] for v, n in ((1, 5), (2, 1), (3, 0), (4, 2))}


def test_audit_picks_deterministic_excluding_the_auditor_min_sample_each() -> None:
    seed, auditor = b"\x99" * 64, _addr(1)
    picks = audit_picks(seed, REVEALS, auditor, 2)
    assert picks == audit_picks(seed, REVEALS, auditor, 2)
    assert picks == audit_picks(seed, dict(reversed(REVEALS.items())), auditor.upper(), 2)
    assert all(v != auditor for v, _ in picks)
    per = {v: [m for vv, m in picks if vv == v] for v in REVEALS}
    assert {v: len(ms) for v, ms in per.items()} == {_addr(1): 0, _addr(2): 1, _addr(3): 0,
                                                     _addr(4): 2}
    assert all(m in REVEALS[v] for v, m in picks) and len(set(picks)) == len(picks)
    # another auditor is sampled among validator 1's five miners; over seeds all get picked
    drawn = {m for i in range(40) for v, m in audit_picks(bytes([i]) * 64, REVEALS, _addr(2), 2)
             if v == _addr(1)}
    assert drawn == set(REVEALS[_addr(1)])
    with pytest.raises(ConfigError):
        audit_picks(seed, REVEALS, auditor, 0)


@settings(max_examples=50, deadline=None)
@given(st.dictionaries(st.integers(0, 30), st.lists(st.integers(0, 60), max_size=12), max_size=6),
       st.integers(0, 30), st.integers(1, 5), st.binary(min_size=64, max_size=64))
def test_audit_picks_properties(reveals: dict[int, list[int]], auditor: int, sample: int,
                                seed: bytes) -> None:
    by_name = {_addr(v): [_addr(m) for m in ms] for v, ms in reveals.items()}
    picks = audit_picks(seed, by_name, _addr(auditor), sample)
    assert picks == audit_picks(seed, dict(reversed(by_name.items())), _addr(auditor), sample)
    for v, miners in by_name.items():
        mine = [m for vv, m in picks if vv == v]
        want = 0 if v == _addr(auditor) else min(sample, len(set(miners)))
        assert len(mine) == want and len(set(mine)) == want and set(mine) <= set(miners)
