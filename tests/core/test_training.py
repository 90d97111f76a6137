from __future__ import annotations

import dataclasses

import pytest
import safetensors.torch
import torch
from fixtures_training import MICRO, SMALL_CFG, task

from protocol.core.checkpoint.format import (
    CheckpointFormatError,
    checkpoint_hash,
    decode_checkpoint,
    encode_checkpoint,
)
from protocol.core.errors import ConfigError
from protocol.core.hardware.observe import check_profile, observe_profile
from protocol.core.hardware.replay_profile import ProfileMismatch, ReplayProfile, profile_hash
from protocol.core.model.gpt import Params, flatten
from protocol.core.proof.submission import Submission
from protocol.core.train.compute_config import ComputeConfig
from protocol.core.train.data import Dataset
from protocol.core.train.training import batch_fn, run_steps, train_round
from protocol.node.profile_setup import apply_profile
from protocol.node.worker_pool import ProfileWorker


def test_config_validation() -> None:
    assert ComputeConfig().n_segments == 10
    with pytest.raises(ConfigError):
        ComputeConfig(inner_steps=10, checkpoint_every=3)
    with pytest.raises(ConfigError):
        ComputeConfig(bits=4)


def test_same_seed_same_profile_is_bitwise_identical(
        honest_sub: Submission, ds: Dataset, theta: Params) -> None:
    again = train_round(task(0), ds, theta, None)
    hashes = tuple(checkpoint_hash(c, MICRO) for c in again.checkpoints)
    assert hashes == honest_sub.trace.checkpoint_hashes
    assert tuple(again.losses) == honest_sub.trace.losses
    assert again.losses[-1] < again.losses[0]


def test_other_miner_or_round_differs(honest_sub: Submission, ds: Dataset, theta: Params) -> None:
    other = train_round(task(1), ds, theta, None)
    assert checkpoint_hash(other.checkpoints[-1], MICRO) != honest_sub.trace.checkpoint_hashes[-1]
    # leaf 0 differs too: the RNG state is seeded per (round, miner)
    assert checkpoint_hash(other.checkpoints[0], MICRO) != honest_sub.trace.checkpoint_hashes[0]


def test_resuming_from_a_checkpoint_is_exact(honest_sub: Submission, ds: Dataset) -> None:
    from protocol.core.model.gpt import GPT

    mid = decode_checkpoint(encode_checkpoint(honest_sub.checkpoints[1], MICRO), MICRO)
    end, losses = run_steps(GPT(MICRO), mid, 2, batch_fn(task(0), ds), SMALL_CFG)
    assert checkpoint_hash(end, MICRO) == honest_sub.trace.checkpoint_hashes[2]
    assert tuple(losses) == honest_sub.trace.losses[2:4]


def test_checkpoint_codec_roundtrip(honest_sub: Submission) -> None:
    c0 = honest_sub.checkpoints[0]
    blob = encode_checkpoint(c0, MICRO)
    back = decode_checkpoint(blob, MICRO)
    assert back.ef is not None and back.step == 0
    assert checkpoint_hash(back, MICRO) == honest_sub.trace.checkpoint_hashes[0]
    assert decode_checkpoint(encode_checkpoint(honest_sub.checkpoints[1], MICRO), MICRO).ef is None


def _meta(blob: bytes) -> dict[str, str]:
    import json
    import struct

    (n,) = struct.unpack("<Q", blob[:8])
    return dict(json.loads(blob[8 : 8 + n])["__metadata__"])


def test_checkpoint_decoder_rejects_bad_input(honest_sub: Submission) -> None:
    c1 = honest_sub.checkpoints[1]
    good = encode_checkpoint(c1, MICRO)
    tensors = safetensors.torch.load(good)
    meta = _meta(good)
    bad_shape = dict(tensors, **{"p/wte.weight": torch.zeros(3, 3)})
    nan = dict(tensors, **{"m/wte.weight": torch.full_like(tensors["m/wte.weight"], float("nan"))})
    extra = dict(tensors, evil=torch.zeros(1))
    for t in (bad_shape, nan, extra):
        with pytest.raises(CheckpointFormatError):
            decode_checkpoint(safetensors.torch.save(t, meta), MICRO)
    with pytest.raises(CheckpointFormatError):  # header fails strict validation
        decode_checkpoint(safetensors.torch.save(tensors, {"veritrain": '{"step": 1}'}), MICRO)
    for junk in (b"", b"\x80\x04junk", b"\xff" * 8 + b"{}", good[:-10]):
        with pytest.raises(CheckpointFormatError):
            decode_checkpoint(junk, MICRO)
    with pytest.raises(CheckpointFormatError):  # over the size cap
        decode_checkpoint(good + b" " * (len(good) * 2), MICRO)
    tiny = dataclasses.replace(MICRO, n_layer=1)
    with pytest.raises(CheckpointFormatError):
        decode_checkpoint(good, tiny)


def test_profile_is_applied_and_checked(profile: ReplayProfile) -> None:
    assert observe_profile() == profile
    assert torch.are_deterministic_algorithms_enabled()
    two = dataclasses.replace(profile, threads=2)
    assert profile_hash(two) != profile_hash(profile)
    with pytest.raises(ProfileMismatch) as info:
        check_profile(two)
    assert set(info.value.differences) == {"threads"}
    with pytest.raises(ProfileMismatch):
        check_profile(dataclasses.replace(profile, torch_version="1.0.0"))


def test_running_two_threads_is_a_profile_mismatch(
        profile: ReplayProfile, honest_sub: Submission, ds: Dataset, theta: Params) -> None:
    two = dataclasses.replace(profile, threads=2)
    try:
        apply_profile(two)
        with pytest.raises(ProfileMismatch):
            check_profile(profile)
    finally:
        apply_profile(profile)
    assert observe_profile() == profile


def _train_hash(t_index: int) -> str:
    from fixtures_training import corpus, theta0

    trained = train_round(task(t_index), corpus(), theta0(), None)
    return checkpoint_hash(trained.checkpoints[-1], MICRO).hex()


def test_worker_spawns_with_avx2_default(honest_sub: Submission) -> None:
    declared = ReplayProfile(threads=1)  # defaults: avx2, deterministic, float32, this torch
    assert declared.cpu_capability == "avx2"
    try:
        worker = ProfileWorker(declared).__enter__()
    except ProfileMismatch as exc:  # a host without AVX2 cannot run the default profile
        pytest.skip(str(exc))
    try:
        assert worker.call(observe_profile) == declared
        if observe_profile().cpu_capability == "avx2":
            assert worker.call(_train_hash, 0) == honest_sub.trace.checkpoint_hashes[-1].hex()
    finally:
        worker.close()


def test_worker_refuses_an_impossible_profile() -> None:
    with pytest.raises(ProfileMismatch) as info:
        with ProfileWorker(ReplayProfile(threads=1, torch_version="0.0.1")):
            pass
    assert "torch_version" in info.value.differences


def test_flat_delta_is_nonzero(honest_sub: Submission, theta: Params) -> None:
    assert float((flatten(theta) - flatten(honest_sub.checkpoints[-1].params)).abs().max()) > 0
