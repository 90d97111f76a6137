"""Hardware classes: stable ids, labels, lookup by id or label, and what this machine can run."""

from __future__ import annotations

import dataclasses
import os

import pytest
import torch

from protocol.core.hardware.hardware_class import (
    ClassNotPermitted,
    Host,
    class_id,
    default_classes,
    find_class,
    label,
    own_classes,
    runnable_on,
)
from protocol.core.hardware.replay_profile import ReplayProfile, profile_hash
from protocol.node.host_probe import runnable_here, this_host

PINNED = ReplayProfile(torch_version="2.5.1")
HOST = Host(capability="avx2", cpu_count=2, torch_version="2.5.1", cuda=False)


def test_class_id_is_the_profile_hash_and_stable():
    # golden: a change here changes every deployed profile_hash
    assert class_id(PINNED).hex() == "e2a4a1847ce23575291d493eea00c19e88f92b00c0b10bb9bf9c6f7c1d8488d7"
    assert class_id(PINNED) == profile_hash(PINNED) == class_id(ReplayProfile(torch_version="2.5.1"))


@pytest.mark.parametrize("change", [{"threads": 2}, {"cpu_capability": "avx512"}, {"deterministic": False},
                                    {"dtype": "float64"}, {"torch_version": "2.5.2"}, {"device": "cuda"}])
def test_every_field_changes_the_id(change):
    assert class_id(dataclasses.replace(PINNED, **change)) != class_id(PINNED)


def test_labels():
    assert label(PINNED) == "cpu/avx2/1t/float32"
    assert label(dataclasses.replace(PINNED, threads=2, deterministic=False)) == "cpu/avx2/2t/float32/nondet"


def test_default_classes_follow_the_profiles_torch_build():
    three = default_classes(PINNED)
    assert [label(c) for c in three] == ["cpu/avx2/1t/float32", "cpu/avx2/2t/float32", "cpu/avx512/1t/float32"]
    assert {c.torch_version for c in three} == {"2.5.1"}
    odd = dataclasses.replace(PINNED, threads=4)
    assert default_classes(odd) == [odd, *three]  # the run's profile first when it is not one of the three


def test_find_class_by_label_or_id():
    classes = default_classes(PINNED)
    assert find_class(classes, "cpu/avx2/2t/float32") == classes[1]
    assert find_class(classes, class_id(classes[2]).hex()[:8]) == classes[2]
    assert find_class(classes, class_id(classes[0]).hex().upper()) == classes[0]
    with pytest.raises(ClassNotPermitted, match="cpu/avx2/1t/float32, cpu/avx2/2t/float32, cpu/avx512/1t/float32"):
        find_class(classes, "cpu/avx2/8t/float32")
    with pytest.raises(ClassNotPermitted):
        find_class(classes, class_id(classes[0]).hex()[:6])  # too short to be an id
    twins = [PINNED, dataclasses.replace(PINNED, torch_version="2.6.0")]
    with pytest.raises(ClassNotPermitted, match="give an id"):
        find_class(twins, "cpu/avx2/1t/float32")


@pytest.mark.parametrize("change, reason", [
    ({}, ""),
    ({"cpu_capability": "default"}, ""),
    ({"threads": 2}, ""),
    ({"cpu_capability": "avx512"}, "needs avx512, this CPU runs at most avx2"),
    ({"threads": 3}, "needs 3 threads, this machine has 2 CPUs"),
    ({"torch_version": "2.6.0"}, "needs torch 2.6.0, this machine has 2.5.1"),
    ({"cpu_capability": "neon"}, "unknown CPU capability 'neon'"),
    ({"device": "cuda"}, "no CUDA device"),
    ({"device": "mps"}, "device 'mps' is not supported"),
    ({"dtype": "float33"}, "unknown dtype 'float33'"),
])
def test_runnable_on(change, reason):
    ok, why = runnable_on(dataclasses.replace(PINNED, **change), HOST)
    assert ok == (reason == "") and why.startswith(reason)


GPU_HOST = dataclasses.replace(HOST, cuda=True, gpu_model="NVIDIA H200", compute_capability="9.0",
                               cuda_version="12.4", cudnn_version="90100", gpu_count=2)
H200 = dataclasses.replace(PINNED, device="cuda", gpu_model="NVIDIA H200", compute_capability="9.0",
                           cuda_version="12.4", cudnn_version="90100")


def test_cuda_class_runs_only_on_its_own_gpu_and_builds():
    assert runnable_on(H200, GPU_HOST) == (True, "")
    assert runnable_on(dataclasses.replace(H200, world_size=2), GPU_HOST) == (True, "")
    assert runnable_on(H200, HOST) == (False, "no CUDA device")
    unnamed = dataclasses.replace(PINNED, device="cuda")  # a CUDA class that names no GPU replays on none
    assert runnable_on(unnamed, GPU_HOST)[1].startswith("a CUDA class must name its GPU model")


@pytest.mark.parametrize("change, reason", [
    ({"gpu_model": "NVIDIA A100-SXM4-80GB"}, "needs GPU NVIDIA A100-SXM4-80GB, this machine has NVIDIA H200"),
    ({"compute_capability": "8.0"}, "needs compute capability 8.0, this machine has 9.0"),
    ({"cuda_version": "12.1"}, "needs CUDA 12.1, this machine has 12.4"),
    ({"cudnn_version": ""}, "needs cuDNN none, this machine has 90100"),
    ({"world_size": 3}, "needs 3 GPUs (NVIDIA H200), this machine has 2"),
    ({"world_size": 2, "threads": 2}, "needs 4 threads (2 processes x 2), this machine has 2 CPUs"),
    ({"torch_version": "2.6.0"}, "needs torch 2.6.0, this machine has 2.5.1"),
    ({"cpu_capability": "avx512"}, "needs avx512, this CPU runs at most avx2"),  # the host's side of the work
    ({"dtype": "bf16-autocast"}, ""),
])
def test_cuda_runnable_on(change, reason):
    assert runnable_on(dataclasses.replace(H200, **change), GPU_HOST) == (reason == "", reason)


def test_a_cpu_world_size_needs_threads_for_every_process():
    assert runnable_on(dataclasses.replace(PINNED, world_size=2), HOST) == (True, "")
    ok, why = runnable_on(dataclasses.replace(PINNED, world_size=3), HOST)
    assert not ok and why == "needs 3 threads (3 processes x 1), this machine has 2 CPUs"


def test_cuda_and_world_size_labels():
    assert label(H200) == "cuda/nvidia-h200/sm90/float32"
    assert label(dataclasses.replace(H200, dtype="bf16-autocast", world_size=2)) == "cuda/nvidia-h200/sm90/bf16-autocast/x2"
    assert label(dataclasses.replace(PINNED, world_size=2)) == "cpu/avx2/1t/float32/x2"
    classes = [PINNED, H200, dataclasses.replace(PINNED, world_size=2)]
    assert find_class(classes, "CUDA/NVIDIA-H200/SM90/FLOAT32") == H200  # labels are found case-insensitively
    assert find_class(classes, "cpu/avx2/1t/float32/x2") == classes[2]


def test_own_classes_add_the_gpu_when_there_is_one():
    assert own_classes(HOST) == [ReplayProfile(threads=2, cpu_capability="avx2", torch_version="2.5.1")]
    cpu, gpu = own_classes(GPU_HOST)
    assert gpu == dataclasses.replace(H200, threads=1) and runnable_on(gpu, GPU_HOST) == (True, "")
    assert runnable_on(cpu, GPU_HOST) == (True, "")


def test_this_host():
    host = this_host()
    assert host.torch_version == torch.__version__ and host.cpu_count == (os.cpu_count() or 1)
    here = ReplayProfile(cpu_capability="avx2")
    assert runnable_here(here) == (host.capability in ("avx2", "avx512"), runnable_on(here, host)[1])
    ok, why = runnable_here(dataclasses.replace(here, threads=host.cpu_count + 1))
    assert not ok and f"needs {host.cpu_count + 1} threads" in why


@pytest.mark.skipif(torch.backends.cpu.get_cpu_capability() != "AVX2", reason="needs a host that stops at AVX2")
def test_avx512_refused_on_an_avx2_host():
    ok, why = runnable_here(ReplayProfile(cpu_capability="avx512"))
    assert not ok and why == "needs avx512, this CPU runs at most avx2"
