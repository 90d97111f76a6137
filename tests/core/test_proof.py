from __future__ import annotations

import dataclasses

import pytest
import safetensors.torch
from fixtures_training import MICRO, corpus, task, theta0

from protocol.core.checkpoint.format import CheckpointFormatError, checkpoint_hash
from protocol.core.crypto.hashing import merkle_proof, merkle_root, verify_merkle_proof
from protocol.core.crypto.signing import NodeIdentity
from protocol.core.errors import SignatureError
from protocol.core.hardware.replay_profile import ProfileMismatch, ReplayProfile
from protocol.core.model.gpt import Params
from protocol.core.proof.challenge import (
    Challenge,
    ChallengeError,
    choose_segments,
    make_challenge,
    verify_challenge,
)
from protocol.core.proof.derivation import verify_update_derivation
from protocol.core.proof.envelope import encode_proof
from protocol.core.proof.replay import ReplayStatus, replay_segment
from protocol.core.proof.submission import Submission, honest
from protocol.core.proof.trace import (
    ProofMismatch,
    Trace,
    TraceError,
    carry_hash,
    check_leaf_proof,
    check_served_leaf,
    check_trace,
    decode_carry,
    encode_carry,
    leaf_proof,
    losses_hash,
    trace_leaves,
    trace_root,
    trace_size,
    zero_carry_hash,
)
from protocol.core.proof.verdict import judge, verify_submission
from protocol.core.train.compute_config import ComputeConfig
from protocol.core.train.data import Dataset
from protocol.core.train.training import Carry, fresh_checkpoint, zero_carry

ZERO_CARRY = zero_carry_hash(MICRO)


def test_trace_layout_and_proofs(honest_sub: Submission) -> None:
    t = honest_sub.trace
    leaves = trace_leaves(t)
    assert len(leaves) == 3 + 1 + 2 and leaves[4] == losses_hash(t.losses)
    assert leaves[5] == t.carry_hash
    root = trace_root(t)
    for i, leaf in enumerate(leaves):
        verify_merkle_proof(root, leaf, leaf_proof(t, i))
    check_trace(t, root, task(0).cfg)
    forged = dataclasses.replace(t, losses=(1.0, *t.losses[1:]))
    with pytest.raises(TraceError):
        check_trace(forged, root, task(0).cfg)
    with pytest.raises(TraceError):
        check_trace(Trace(t.checkpoint_hashes[:2], t.losses, t.carry_hash), root, task(0).cfg)


def test_challenge_from_signature() -> None:
    cfg = ComputeConfig()
    v = NodeIdentity(b"\x07" * 32)
    miner, bh = b"\x01" * 20, b"\xbb" * 32
    ch = make_challenge(v, 5, miner, bh, cfg)
    assert ch == make_challenge(v, 5, miner, bh, cfg)  # ed25519 is deterministic
    assert len(ch.segments) == 1 and 0 <= ch.segments[0] < 10
    verify_challenge(v.public_key, 5, miner, bh, ch, cfg)
    with pytest.raises(SignatureError):
        verify_challenge(v.public_key, 6, miner, bh, ch, cfg)
    with pytest.raises(ChallengeError):
        verify_challenge(v.public_key, 5, miner, bh, Challenge(ch.signature, ch.seed, ((ch.segments[0] + 1) % 10,)), cfg)
    # over many validators the choice is spread over all segments
    picks = {make_challenge(NodeIdentity(bytes([i]) * 32), 5, miner, bh, cfg).segments[0]
             for i in range(60)}
    assert picks == set(range(10))
    assert len(choose_segments(b"s", 10, 3)) == 3


def test_honest_replay_matches_bitwise(honest_sub: Submission, ds: Dataset,
                                       profile: ReplayProfile) -> None:
    t0 = task(0)
    for s in range(3):
        r = replay_segment(t0, ds, honest_sub.trace, s, honest_sub.fetch(s, t0),
                           honest_sub.fetch(s + 1, t0), profile)
        assert r.status is ReplayStatus.MATCH and r.losses_match
        assert r.actual_hash == r.expected_hash and r.max_abs_err == 0.0


def test_tolerance_mode_is_flagged(honest_sub: Submission, ds: Dataset,
                                   profile: ReplayProfile) -> None:
    t0 = task(0)
    end = honest_sub.checkpoints[2]
    nudged = dict(end.params)
    nudged["ln_f.bias"] = nudged["ln_f.bias"] + 1e-7
    fake_end = dataclasses.replace(end, params=nudged)
    hashes = list(honest_sub.trace.checkpoint_hashes)
    hashes[2] = checkpoint_hash(fake_end, MICRO)
    trace = dataclasses.replace(honest_sub.trace, checkpoint_hashes=tuple(hashes))
    from protocol.core.checkpoint.format import encode_checkpoint

    args = (t0, ds, trace, 1, honest_sub.fetch(1, t0), encode_checkpoint(fake_end, MICRO), profile)
    exact = replay_segment(*args, mode="exact")
    assert exact.status is ReplayStatus.MISMATCH and 0 < exact.max_abs_err < 1e-6
    tol = replay_segment(*args, mode="tolerance")
    assert tol.status is ReplayStatus.TOLERATED and tol.rel_err < 1e-4


def test_replay_under_wrong_profile_raises(honest_sub: Submission, ds: Dataset,
                                           profile: ReplayProfile) -> None:
    t0 = task(0)
    wrong = dataclasses.replace(profile, threads=2)
    with pytest.raises(ProfileMismatch):
        replay_segment(t0, ds, honest_sub.trace, 0, honest_sub.fetch(0, t0),
                       honest_sub.fetch(1, t0), wrong)


def test_derivation_of_honest_update(honest_sub: Submission, theta: Params) -> None:
    t0 = task(0)
    d = verify_update_derivation(t0, honest_sub.trace, theta, ZERO_CARRY, honest_sub.fetch(0, t0),
                                 honest_sub.fetch(3, t0), honest_sub.blob)
    assert d.failures == () and d.missing_leaf is None
    assert d.update_expected == d.update_committed and d.leaf0_expected == d.leaf0_committed


def test_defaults_h30_k3_round_verifies(profile: ReplayProfile) -> None:
    cfg = ComputeConfig(batch_size=4, pages_per_miner=4)  # H=30, k=3, q=1, top-64/4096, 2-bit
    t = task(3, cfg=cfg)
    ds, theta = corpus(), theta0()
    sub = honest(t, ds, theta, None)
    assert len(sub.trace.checkpoint_hashes) == 11 and len(sub.trace.losses) == 30
    ch = make_challenge(NodeIdentity(b"\x09" * 32), 1, t.miner, b"\x01" * 32, cfg)
    v = verify_submission(t, ds, theta, ZERO_CARRY, sub.root, sub.trace, sub.blob,
                          lambda i: sub.fetch(i, t), ch.segments, profile)
    assert judge(v).kind is None and v.replays[0].status is ReplayStatus.MATCH
    assert sub.trace.losses[-1] < sub.trace.losses[0]


def test_carry_round_trips_and_warms_the_next_round(honest_sub: Submission, theta: Params) -> None:
    carry = honest_sub.carry
    assert carry is not None and carry_hash(carry) == honest_sub.trace.carry_hash
    assert carry_hash(decode_carry(encode_carry(carry), MICRO)) == carry_hash(carry)
    # a carried second moment starts the next round warm (no bias correction); zeros do not
    assert not fresh_checkpoint(task(1), theta, zero_carry(MICRO)).warm
    assert not fresh_checkpoint(task(1), theta, None).warm
    warm = fresh_checkpoint(task(1), theta, carry)
    assert warm.warm and all(not t.any() for t in warm.exp_avg.values())  # m restarts at zero
    # `warm` is part of the checkpoint hash, so a miner cannot flip it unnoticed
    assert checkpoint_hash(warm, MICRO) != checkpoint_hash(dataclasses.replace(warm, warm=False), MICRO)
    short = Carry(carry.residual[:-1], carry.second_moment)
    with pytest.raises(CheckpointFormatError):
        decode_carry(safetensors.torch.save({"residual": short.residual}), MICRO)


# ---------------------------------------------------------------------------------------
# rule 10: every served checkpoint's proof is checked against the committed trace root


def _served(sub: Submission, leaf: int) -> tuple[bytes, bytes]:
    """What an honest miner serves for `leaf`: the checkpoint bytes and their encoded proof."""
    p = leaf_proof(sub.trace, leaf)
    blob = sub.fetch(leaf, task(0))
    assert blob is not None
    return blob, encode_proof(p.index, p.size, list(p.siblings))


def test_honest_checkpoint_proofs_verify_against_the_committed_root(honest_sub: Submission) -> None:
    t = task(0)
    assert trace_size(t.cfg) == len(trace_leaves(honest_sub.trace))
    for leaf in range(t.cfg.n_segments + 1):
        blob, proof = _served(honest_sub, leaf)
        check_served_leaf(blob, proof, honest_sub.root, leaf, t.model, t.cfg)  # raises if not


def test_a_forged_or_misplaced_proof_is_a_proof_mismatch(honest_sub: Submission) -> None:
    t, root = task(0), honest_sub.root
    blob1, proof1 = _served(honest_sub, 1)
    blob2, proof2 = _served(honest_sub, 2)
    p = leaf_proof(honest_sub.trace, 1)
    forged = encode_proof(1, p.size, [bytes(32), *p.siblings[1:]])
    cases = {
        "forged sibling": (blob1, forged, 1),
        "another leaf's checkpoint and proof, asked as leaf 1": (blob2, proof2, 1),
        "leaf 1's proof on leaf 2's checkpoint": (blob2, proof1, 1),
        "leaf 1's checkpoint answered for leaf 2": (blob1, proof1, 2),
        "garbage proof": (blob1, b"not json", 1),
        "not a checkpoint": (b"\x00" * 64, proof1, 1),
        "the losses leaf is not a checkpoint": (blob1, proof1, t.cfg.n_segments + 1),
    }
    for name, (blob, proof, leaf) in cases.items():
        with pytest.raises(ProofMismatch):
            check_served_leaf(blob, proof, root, leaf, t.model, t.cfg)
            pytest.fail(name)
    other_root = trace_root(dataclasses.replace(honest_sub.trace, carry_hash=bytes(32)))
    with pytest.raises(ProofMismatch):  # the right proof, but another miner's (or round's) root
        check_served_leaf(blob1, proof1, other_root, 1, t.model, t.cfg)


def test_check_leaf_proof_pins_index_and_size() -> None:
    leaves = [bytes([i]) * 32 for i in range(13)]
    root = merkle_root(leaves)
    p = merkle_proof(leaves, 3)
    good = encode_proof(3, 13, list(p.siblings))
    check_leaf_proof(root, 3, 13, leaves[3], good)
    with pytest.raises(ProofMismatch, match="not 4 of 13"):
        check_leaf_proof(root, 4, 13, leaves[3], good)
    with pytest.raises(ProofMismatch, match="not 3 of 14"):
        check_leaf_proof(root, 3, 14, leaves[3], good)
    with pytest.raises(ProofMismatch):
        check_leaf_proof(root, 3, 13, leaves[4], good)
