"""Hardware classes: stable ids, labels, lookup by id or label, and what this machine can run."""

from __future__ import annotations

import dataclasses
import os

import pytest
import torch

from protocol.core.hardware_class import (
    ClassNotPermitted,
    Host,
    class_id,
    default_classes,
    find_class,
    label,
    runnable_here,
    runnable_on,
    this_host,
)
from protocol.core.replay_profile import ReplayProfile, profile_hash

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


def test_cuda_class_runs_where_torch_sees_cuda():
    assert runnable_on(dataclasses.replace(PINNED, device="cuda"), dataclasses.replace(HOST, cuda=True)) == (True, "")


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
