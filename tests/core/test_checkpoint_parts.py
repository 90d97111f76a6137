"""Per-tensor checkpoint hashing: a part (the digest list with some tensors) proves the same
leaf as the whole checkpoint, each check reads only its part, and a forged part is refused."""

from __future__ import annotations

import dataclasses
import json
import struct

import pytest
import safetensors.torch
import torch
from fixtures_training import MICRO, task

from protocol.core.checkpoint.format import (
    MAX_HEADER_BYTES,
    CheckpointFormatError,
    checkpoint_hash,
    decode_checkpoint,
    encode_checkpoint,
)
from protocol.core.checkpoint.part_bytes import CheckpointPart, merge_parts, part_keys, part_of_blob
from protocol.core.checkpoint.parts import decode_served
from protocol.core.checkpoint.tensor_subset import SubsetError
from protocol.core.hardware.replay_profile import ReplayProfile
from protocol.core.model.gpt import Params
from protocol.core.proof.derivation import verify_update_derivation
from protocol.core.proof.envelope import encode_proof
from protocol.core.proof.replay import ReplayStatus, replay_segment, served_part
from protocol.core.proof.submission import Submission
from protocol.core.proof.trace import ProofMismatch, check_served_leaf, leaf_proof, zero_carry_hash
from protocol.core.train.data import Dataset

P = CheckpointPart


def _blob(sub: Submission, leaf: int) -> bytes:
    blob = sub.fetch(leaf, task(0))
    assert blob is not None
    return blob


def _proof(sub: Submission, leaf: int) -> bytes:
    p = leaf_proof(sub.trace, leaf)
    return encode_proof(p.index, p.size, list(p.siblings))


def test_every_part_has_the_whole_checkpoints_hash_and_only_its_tensors(honest_sub: Submission) -> None:
    whole = _blob(honest_sub, 0)
    ckpt = decode_checkpoint(whole, MICRO)
    for part in P:
        blob = part_of_blob(whole, part, MAX_HEADER_BYTES)
        served = decode_served(blob, MICRO)
        assert served.hash == checkpoint_hash(ckpt, MICRO) == honest_sub.trace.checkpoint_hashes[0]
        assert set(served.tensors) == part_keys(part, served.leaves)
        for key, t in served.tensors.items():
            assert torch.equal(t, safetensors.torch.load(whole)[key])
        assert served.holds(part) and (part is P.ALL or not served.holds(P.ALL))
    sizes = {part: len(part_of_blob(whole, part, MAX_HEADER_BYTES)) for part in P}
    assert sizes[P.HASHES] < 10_000 < sizes[P.EF] < sizes[P.PARAMS] < sizes[P.ALL] <= len(whole) + 8


def test_a_part_of_a_part_that_holds_it_is_the_same_bytes(honest_sub: Submission) -> None:
    whole = _blob(honest_sub, 0)
    params = part_of_blob(whole, P.PARAMS, MAX_HEADER_BYTES)
    assert part_of_blob(params, P.PARAMS, MAX_HEADER_BYTES) == params
    assert part_of_blob(params, P.HASHES, MAX_HEADER_BYTES) == part_of_blob(whole, P.HASHES, MAX_HEADER_BYTES)
    for missing in (P.EF, P.ALL):
        with pytest.raises(SubsetError):
            part_of_blob(params, missing, MAX_HEADER_BYTES)


def test_merged_parts_hold_each_part() -> None:
    assert merge_parts([P.HASHES]) is P.HASHES
    assert merge_parts([P.HASHES, P.PARAMS]) is P.PARAMS
    assert merge_parts([P.EF, P.PARAMS]) is P.ALL
    assert merge_parts([P.EF, P.ALL, P.HASHES]) is P.ALL


def test_each_part_proves_its_leaf_and_a_missing_part_is_a_proof_mismatch(honest_sub: Submission) -> None:
    t, root = task(0), honest_sub.root
    for leaf in (0, t.cfg.n_segments):
        whole, proof = _blob(honest_sub, leaf), _proof(honest_sub, leaf)
        for part in P:
            check_served_leaf(part_of_blob(whole, part, MAX_HEADER_BYTES), proof, root, leaf, t.model, t.cfg, part)
        hashes = part_of_blob(whole, P.HASHES, MAX_HEADER_BYTES)
        asked_for = (P.EF, P.PARAMS, P.ALL) if leaf == 0 else (P.PARAMS, P.ALL)  # only leaf 0 has an ef
        for asked in asked_for:  # a holder answering a part it was not asked for
            with pytest.raises(ProofMismatch, match="part"):
                check_served_leaf(hashes, proof, root, leaf, t.model, t.cfg, asked)


def _rewrite(blob: bytes, edit) -> bytes:  # type: ignore[no-untyped-def]
    """`blob` with its tensors and its metadata body changed by `edit(tensors, body)`."""
    tensors = safetensors.torch.load(blob)
    (n,) = struct.unpack("<Q", blob[:8])
    body = json.loads(json.loads(blob[8 : 8 + n])["__metadata__"]["veritrain"])
    edit(tensors, body)
    return safetensors.torch.save(tensors, {"veritrain": json.dumps(body)})


def test_a_forged_tensor_or_digest_list_is_refused(honest_sub: Submission) -> None:
    t, root, leaf = task(0), honest_sub.root, 1
    whole, proof = _blob(honest_sub, leaf), _proof(honest_sub, leaf)
    first = sorted(k for k in safetensors.torch.load(whole) if k.startswith("p/"))[0]

    def bump_tensor(tensors, _body):  # type: ignore[no-untyped-def]
        tensors[first] = tensors[first] + 1.0  # the listed digest no longer matches

    def bump_digest(_tensors, body):  # type: ignore[no-untyped-def]
        body["leaves"][first] = "00" * 32  # its tensor no longer matches the list

    def drop_digest(tensors, body):  # type: ignore[no-untyped-def]
        del body["leaves"]["rng"], tensors["rng"]  # a list without a tensor of the model

    def claim_digest_of_forgery(tensors, body):  # type: ignore[no-untyped-def]
        from protocol.core.checkpoint.format import tensor_digest

        tensors[first] = tensors[first] + 1.0  # consistent part, but another root
        body["leaves"][first] = tensor_digest(tensors[first]).hex()

    for edit in (bump_tensor, bump_digest, drop_digest):
        with pytest.raises(CheckpointFormatError):
            decode_served(_rewrite(whole, edit), MICRO)
        with pytest.raises(ProofMismatch):
            check_served_leaf(_rewrite(whole, edit), proof, root, leaf, t.model, t.cfg)
    with pytest.raises(ProofMismatch):
        check_served_leaf(_rewrite(whole, claim_digest_of_forgery), proof, root, leaf, t.model, t.cfg)


def test_the_derivation_reads_leaf_0s_ef_and_the_last_leafs_parameters(honest_sub: Submission,
                                                                       theta: Params) -> None:
    t, n = task(0), task(0).cfg.n_segments
    leaf0 = part_of_blob(_blob(honest_sub, 0), P.EF, MAX_HEADER_BYTES)
    final = part_of_blob(_blob(honest_sub, n), P.PARAMS, MAX_HEADER_BYTES)
    got = verify_update_derivation(t, honest_sub.trace, theta, zero_carry_hash(MICRO), leaf0, final,
                                   honest_sub.blob)
    whole = verify_update_derivation(t, honest_sub.trace, theta, zero_carry_hash(MICRO), _blob(honest_sub, 0),
                                     _blob(honest_sub, n), honest_sub.blob)
    assert got.failures == () == whole.failures
    # leaf 0 without its ef, or the last leaf without its parameters, is not served
    hashes0 = part_of_blob(_blob(honest_sub, 0), P.HASHES, MAX_HEADER_BYTES)
    assert verify_update_derivation(t, honest_sub.trace, theta, zero_carry_hash(MICRO), hashes0, final,
                                    honest_sub.blob).missing_leaf == 0
    hashes_n = part_of_blob(_blob(honest_sub, n), P.HASHES, MAX_HEADER_BYTES)
    assert verify_update_derivation(t, honest_sub.trace, theta, zero_carry_hash(MICRO), leaf0, hashes_n,
                                    honest_sub.blob).missing_leaf == n


def test_an_exact_replay_needs_only_the_ends_digest_list(honest_sub: Submission, ds: Dataset,
                                                         profile: ReplayProfile) -> None:
    t = task(0)
    start = _blob(honest_sub, 1)
    end_hashes = part_of_blob(_blob(honest_sub, 2), P.HASHES, MAX_HEADER_BYTES)
    got = replay_segment(t, ds, honest_sub.trace, 1, start, end_hashes, profile)
    assert got.status is ReplayStatus.MATCH
    # the start must be whole: a part of it is not served
    start_params = part_of_blob(start, P.PARAMS, MAX_HEADER_BYTES)
    assert replay_segment(t, ds, honest_sub.trace, 1, start_params, end_hashes, profile).status is ReplayStatus.UNAVAILABLE


def test_a_forged_end_is_caught_from_its_digest_list(honest_sub: Submission, ds: Dataset,
                                                     profile: ReplayProfile) -> None:
    """A miner that commits a made-up end checkpoint cannot pass by serving only its digests."""
    t = task(0)
    end = decode_checkpoint(_blob(honest_sub, 2), MICRO)
    fake = dataclasses.replace(end, params={k: v + 1e-3 for k, v in end.params.items()})
    hashes = list(honest_sub.trace.checkpoint_hashes)
    hashes[2] = checkpoint_hash(fake, MICRO)
    trace = dataclasses.replace(honest_sub.trace, checkpoint_hashes=tuple(hashes))
    fake_hashes = part_of_blob(encode_checkpoint(fake, MICRO), P.HASHES, MAX_HEADER_BYTES)
    got = replay_segment(t, ds, trace, 1, _blob(honest_sub, 1), fake_hashes, profile)
    assert got.status is ReplayStatus.MISMATCH
    assert served_part(fake_hashes, hashes[2], t, P.HASHES) is not None  # it was served, and is wrong


def test_a_made_up_second_moment_digest_passes_the_derivation_but_not_a_replay_of_its_segment(
        honest_sub: Submission, theta: Params, ds: Dataset, profile: ReplayProfile) -> None:
    """The last leaf ships only its parameters: a miner could list any digest for its second
    moment (and carry it). That is the same gamble as forging the tensor: the derivation passes,
    but a replay of the last segment recomputes the real second moment and its hash differs,
    and nobody can serve the leaf whole."""
    from protocol.core.checkpoint.format import _header as header_of
    from protocol.core.checkpoint.format import (
        checkpoint_layout,
        checkpoint_leaves,
        hash_digests,
        header_bytes,
    )
    from protocol.core.checkpoint.safetensors_layout import serialized
    from protocol.core.proof.trace import Trace, carry_hash_of, tensor_digest, trace_root
    from protocol.core.train.training import Carry

    t, n = task(0), task(0).cfg.n_segments
    final = decode_checkpoint(_blob(honest_sub, n), MICRO)
    leaves = checkpoint_leaves(final)
    v_key = sorted(k for k in leaves if k.startswith("v/"))[0]
    leaves[v_key] = tensor_digest(torch.zeros(3))  # no tensor of the model has it
    forged_hash = hash_digests("checkpoint", header_bytes(header_of(final, MICRO)), leaves)
    carry = honest_sub.carry
    assert isinstance(carry, Carry)
    hashes = (*honest_sub.trace.checkpoint_hashes[:-1], forged_hash)
    trace = Trace(hashes, honest_sub.trace.losses, carry_hash_of(tensor_digest(carry.residual), leaves))
    tensors, meta = checkpoint_layout(final, MICRO, leaves)
    forged_params = part_of_blob(b"".join(serialized(tensors, meta)), P.PARAMS, MAX_HEADER_BYTES)
    assert served_part(forged_params, forged_hash, t, P.PARAMS) is not None  # a valid part of that leaf
    leaf0 = part_of_blob(_blob(honest_sub, 0), P.EF, MAX_HEADER_BYTES)
    got = verify_update_derivation(t, trace, theta, zero_carry_hash(MICRO), leaf0, forged_params, honest_sub.blob)
    assert got.failures == ()  # the derivation reads no second moment
    assert trace_root(trace) != honest_sub.root
    replay = replay_segment(t, ds, trace, n - 1, _blob(honest_sub, n - 1), forged_params, profile)
    assert replay.status is ReplayStatus.MISMATCH
    with pytest.raises(CheckpointFormatError):  # the whole leaf: its v tensor does not match the list
        decode_checkpoint(b"".join(serialized(tensors, meta)), MICRO)
