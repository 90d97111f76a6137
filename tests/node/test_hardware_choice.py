"""`--hardware-class`: a node refuses a class the run does not permit, cannot run, or (for now) mixes in."""

from __future__ import annotations

import dataclasses

import pytest

from protocol.config.run_config import RunConfig
from protocol.config.run_setup import training_spec
from protocol.core.hardware.hardware_class import ClassNotPermitted, Host, class_id
from protocol.node.hardware_choice import ClassNotRunnable, choose_class

SPEC = training_spec(RunConfig(training={"profile": {"torch_version": "2.5.1"}}))
HOST = Host(capability="avx2", cpu_count=2, torch_version="2.5.1", cuda=False)


def test_default_is_the_runs_profile():
    assert choose_class(SPEC, None, HOST) == SPEC.profile
    assert choose_class(SPEC, "cpu/avx2/1t/float32", HOST) == SPEC.profile
    assert choose_class(SPEC, class_id(SPEC.profile).hex()[:10], HOST) == SPEC.profile


def test_unpermitted_class_is_refused_with_the_permitted_labels():
    with pytest.raises(ClassNotPermitted, match=r"cpu/avx2/4t/float32.*permitted: cpu/avx2/1t/float32, "
                                                r"cpu/avx2/2t/float32, cpu/avx512/1t/float32"):
        choose_class(SPEC, "cpu/avx2/4t/float32", HOST)


def test_permitted_but_not_runnable_says_why():
    with pytest.raises(ClassNotRunnable, match="needs avx512, this CPU runs at most avx2"):
        choose_class(SPEC, "cpu/avx512/1t/float32", HOST)
    with pytest.raises(ClassNotRunnable, match="needs 2 threads"):
        choose_class(SPEC, "cpu/avx2/2t/float32", dataclasses.replace(HOST, cpu_count=1))


def test_another_permitted_class_runnable_here_is_chosen():
    chosen = choose_class(SPEC, "cpu/avx2/2t/float32", HOST)
    assert chosen != SPEC.profile and chosen in SPEC.classes and chosen.threads == 2
