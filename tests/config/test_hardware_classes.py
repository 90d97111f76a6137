"""Permitted hardware classes in the run config: defaults, the profile among them, hashing, pinning."""

from __future__ import annotations

import dataclasses

import pytest

from protocol.config.run_config import RunConfig, load_run_config
from protocol.config.run_setup import TrainingSpec, resolve, training_spec
from protocol.core.errors import ConfigError
from protocol.core.hardware.hardware_class import (
    ClassNotPermitted,
    class_mask,
    classes_in,
    default_classes,
    label,
)
from protocol.core.hardware.replay_profile import ReplayProfile


def test_default_spec_permits_the_three_cpu_classes():
    spec = TrainingSpec()
    assert [label(c) for c in spec.classes] == ["cpu/avx2/1t/float32", "cpu/avx2/2t/float32", "cpu/avx512/1t/float32"]
    assert spec.profile == spec.classes[0]
    assert resolve(RunConfig()).classes == spec.classes


def test_omitted_classes_take_the_profiles_torch_build_and_include_it():
    # an existing deployment: [training.profile] pinned, no classes
    spec = training_spec(RunConfig(training={"profile": {"threads": 3, "torch_version": "2.0.0"}}))
    assert spec.profile == ReplayProfile(threads=3, torch_version="2.0.0")
    assert spec.classes == default_classes(spec.profile)
    assert spec.classes[0] == spec.profile and {c.torch_version for c in spec.classes} == {"2.0.0"}


def test_profile_outside_the_permitted_classes_is_refused():
    training = {"profile": {"threads": 2}, "classes": [{"threads": 1}, {"cpu_capability": "avx512"}]}
    with pytest.raises(ConfigError, match=r"cpu/avx2/2t/float32 is not among .*\(cpu/avx2/1t/float32, "
                                          r"cpu/avx512/1t/float32\)"):
        training_spec(RunConfig(training=training))
    with pytest.raises(ConfigError, match="not among"):  # the default profile must be listed too
        training_spec(RunConfig(training={"classes": [{"threads": 2}]}))
    with pytest.raises(ConfigError, match="twice"):
        training_spec(RunConfig(training={"classes": [{}, {}]}))
    with pytest.raises(ConfigError, match=r"classes.0.threads"):
        training_spec(RunConfig(training={"classes": [{"threads": 0}]}))
    with pytest.raises(ConfigError, match=r"classes.0.speed"):
        training_spec(RunConfig(training={"classes": [{"speed": 1}]}))


def test_toml_classes_and_the_hash(tmp_path):
    path = tmp_path / "run.toml"
    path.write_text('[training]\npreset = "micro"\n[training.profile]\nthreads = 2\n'
                    '[[training.classes]]\nthreads = 2\n[[training.classes]]\nthreads = 1\n')
    cfg = load_run_config(path)
    spec = training_spec(cfg)
    assert [label(c) for c in spec.classes] == ["cpu/avx2/2t/float32", "cpu/avx2/1t/float32"]
    fewer = {**cfg.training, "classes": [{"threads": 2}]}
    assert cfg.config_hash() != cfg.model_copy(update={"training": fewer}).config_hash()


def test_dumped_spec_pins_every_class_and_round_trips():
    """What deploy writes (pinning.prepare dumps the spec): every class with its torch version."""
    spec = training_spec(RunConfig(training={"classes": [{}, {"threads": 2, "torch_version": "9.9"}]}))
    dumped = spec.model_dump(mode="json")
    assert all("torch_version" in c for c in dumped["classes"])
    assert dumped["classes"][1]["torch_version"] == "9.9"
    assert TrainingSpec.model_validate(dumped) == spec
    assert spec.classes[1] == dataclasses.replace(spec.profile, threads=2, torch_version="9.9")


def test_a_run_permits_at_most_sixteen_classes_the_width_of_a_class_set_on_chain():
    sixteen = [{"threads": t} for t in range(1, 17)]
    assert len(training_spec(RunConfig(training={"classes": sixteen})).classes) == 16
    with pytest.raises(ConfigError, match="at most 16"):
        training_spec(RunConfig(training={"classes": [*sixteen, {"threads": 17}]}))


def test_a_class_set_names_the_permitted_classes_by_position():
    spec = TrainingSpec()
    one, two, avx512 = spec.classes
    assert class_mask(spec.classes, [one]) == 1 and class_mask(spec.classes, [avx512]) == 4
    assert class_mask(spec.classes, [two, one, two]) == 3
    assert classes_in(spec.classes, 0b101) == [one, avx512]
    assert classes_in(spec.classes, 1 << 9) == []  # past the list: nothing
    with pytest.raises(ClassNotPermitted, match="cpu/avx2/4t/float32 is not permitted"):
        class_mask(spec.classes, [ReplayProfile(threads=4)])
