"""Replay profile fields added for CUDA and multi-process miners: the hashing rule, observation,
the CUDA settings (set and read without a GPU), and the worker's spawn environment."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys

import pytest
import torch

from protocol.core.hardware.observe import check_profile, cuda_flags_deterministic, observe_profile
from protocol.core.hardware.replay_profile import (
    BF16_AUTOCAST,
    LATER_FIELDS,
    ProfileMismatch,
    ReplayProfile,
    canonical_fields,
    class_id,
    storage_dtype,
)
from protocol.node.profile_setup import set_cuda_flags
from protocol.node.worker_pool import ProfileWorker

PINNED = ReplayProfile(torch_version="2.5.1")

# golden: computed with the code from before world_size and the CUDA fields existed
BEFORE = [
    ({}, "e2a4a1847ce23575291d493eea00c19e88f92b00c0b10bb9bf9c6f7c1d8488d7"),
    ({"threads": 2}, "0cbb8b9fccaa13108c4d4e12622f3f618a48a436c867c3d40e93d806beda7754"),
    ({"cpu_capability": "avx512"}, "df8ec6076bd18e4f00652d5bdced58f2b015b8c0078faf3b2a895e0416295a03"),
    ({"device": "cuda"}, "ef60641767dcae195c7b44c44921f4fb50fb4d2bf0c2a1a03c661844b1f6a293"),
    ({"deterministic": False, "dtype": "float64"}, "503053823dc744705fffbada7fb3168e57b8507a9169678d1d6bfc7ef0a4d485"),
]


@pytest.mark.parametrize("change, golden", BEFORE)
def test_profiles_from_before_keep_their_ids(change, golden):
    assert class_id(dataclasses.replace(PINNED, **change)).hex() == golden


def test_later_fields_are_hashed_only_away_from_their_defaults():
    assert set(canonical_fields(PINNED)) == {"threads", "cpu_capability", "deterministic", "dtype",
                                             "torch_version", "device"}
    changed = {"world_size": 2, "gpu_model": "NVIDIA H200", "compute_capability": "9.0", "cuda_version": "12.4",
               "cudnn_version": "90100"}
    assert set(changed) == set(LATER_FIELDS)
    ids = {class_id(PINNED)}
    for name, value in changed.items():
        p = dataclasses.replace(PINNED, **{name: value})
        assert canonical_fields(p)[name] == value
        ids.add(class_id(p))
    assert len(ids) == 1 + len(changed)  # every later field, once set, is its own class


def test_world_size_must_be_positive():
    with pytest.raises(ValueError):
        ReplayProfile(world_size=0)


def test_a_missing_gpu_is_a_profile_mismatch_not_a_crash():
    if torch.cuda.is_available():
        pytest.skip("this host has a GPU: the CUDA tests cover it (tests/core/test_replay_profile_devices.py)")
    declared = dataclasses.replace(observe_profile(), device="cuda", gpu_model="NVIDIA H200",
                                   compute_capability="9.0", cuda_version="12.4")
    seen = observe_profile(declared)
    assert seen.device == "cpu" and seen.gpu_model == ""
    with pytest.raises(ProfileMismatch) as info:
        check_profile(declared)
    assert set(info.value.differences) == {"device", "gpu_model", "compute_capability", "cuda_version"}


def test_observing_the_choices_a_process_makes():
    here = observe_profile()
    assert here.world_size == 1 and here.device == "cpu"
    assert observe_profile(dataclasses.replace(here, world_size=4)).world_size == 4  # no process group: the launcher's
    bf16 = observe_profile(dataclasses.replace(here, dtype=BF16_AUTOCAST))
    assert bf16.dtype == BF16_AUTOCAST and storage_dtype(bf16) == "float32" == storage_dtype(here)
    assert observe_profile(dataclasses.replace(here, dtype="float64")).dtype == "float32"  # observed, not declared


def test_cuda_settings_are_set_and_read_without_a_gpu(monkeypatch):
    saved = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32, torch.backends.cudnn.benchmark,
             torch.backends.cudnn.deterministic)
    try:
        monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
        torch.backends.cudnn.benchmark = True
        assert not cuda_flags_deterministic()
        set_cuda_flags(True)
        assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"
        assert not torch.backends.cuda.matmul.allow_tf32 and not torch.backends.cudnn.allow_tf32
        assert not torch.backends.cudnn.benchmark and torch.backends.cudnn.deterministic
        assert cuda_flags_deterministic()
        torch.backends.cuda.matmul.allow_tf32 = True  # TF32 matmuls change bits
        assert not cuda_flags_deterministic()
    finally:
        (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32, torch.backends.cudnn.benchmark,
         torch.backends.cudnn.deterministic) = saved


def test_the_worker_starts_with_the_cublas_workspace_and_leaves_ours_alone():
    """And a ProfileMismatch raised in it comes back with its differences (it pickles by them)."""
    before = os.environ.get("CUBLAS_WORKSPACE_CONFIG")
    declared = ReplayProfile(threads=1, cpu_capability=observe_profile().cpu_capability)
    with ProfileWorker(declared) as worker:
        assert worker.call(os.getenv, "CUBLAS_WORKSPACE_CONFIG") == ":4096:8"
        assert worker.call(os.getenv, "ATEN_CPU_CAPABILITY") == declared.cpu_capability
        with pytest.raises(ProfileMismatch) as info:  # raised in the worker, it crosses with its differences
            worker.call(check_profile, dataclasses.replace(declared, threads=2))
        assert info.value.differences == {"threads": (2, 1)}
    assert os.environ.get("CUBLAS_WORKSPACE_CONFIG") == before


def test_a_profile_sets_determinism_both_ways_without_importing_torch_compile():
    """set_in_process calls torch's determinism switch directly: torch.use_deterministic_algorithms
    also imports inductor (1.5 s of every worker's start) for a flag only torch.compile reads."""
    script = ("import sys, torch\n"
              "from protocol.core.hardware.replay_profile import ReplayProfile\n"
              "from protocol.node.profile_setup import set_in_process\n"
              "set_in_process(ReplayProfile(deterministic=False)); off = torch.are_deterministic_algorithms_enabled()\n"
              "set_in_process(ReplayProfile()); on = torch.are_deterministic_algorithms_enabled()\n"
              "print(off, on, 'torch._inductor' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.split() == ["False", "True", "False"], out.stderr
