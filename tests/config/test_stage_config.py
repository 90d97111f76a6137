"""Pipeline stages in the run config (PROTOCOL.md §16): `[training] stages`, `microbatches` and
`stage_classes` are consensus (hashed), refused before anything starts when they cannot hold,
and a run without them resolves exactly as before."""

from __future__ import annotations

from dataclasses import asdict, replace

import pytest

from protocol.config.run_config import RunConfig
from protocol.config.run_setup import resolve, training_spec
from protocol.core.errors import ConfigError
from protocol.core.hardware.hardware_class import default_classes
from protocol.core.hardware.stage_classes import StageClassesOverflow
from protocol.core.pipeline.stage_split import split_model


def _setup(**training):
    return resolve(RunConfig(training={"preset": "micro", **training}))


def test_a_run_without_stages_has_no_split_and_its_defaults_change_no_hash():
    plain = RunConfig(training={"preset": "micro"})
    assert resolve(plain).stage_split is None
    # deploy writes the whole spec: the stage fields at their defaults, which a node reads back alike
    pinned = RunConfig(training=training_spec(plain).model_dump(mode="json"))
    assert training_spec(pinned) == training_spec(plain) and resolve(pinned).stage_split is None


def test_stages_split_the_model_as_the_core_does_and_enter_the_run_config_hash():
    setup = _setup(stages=2)
    assert setup.stage_split == split_model(setup.model, 2)
    assert RunConfig(training={"preset": "micro", "stages": 2}).config_hash() != RunConfig(
        training={"preset": "micro"}).config_hash()
    assert setup.stage_classes(0) == setup.stage_classes(1) == setup.classes  # none given: the run's


def test_each_stage_may_narrow_the_runs_classes():
    classes = [asdict(c) for c in default_classes(training_spec(RunConfig()).profile)]
    setup = _setup(stages=2, stage_classes=[classes[:1], classes[1:]])
    assert setup.stage_classes(0) == setup.classes[:1] and setup.stage_classes(1) == setup.classes[1:]


@pytest.mark.parametrize("training, needle", [
    ({"stages": 1}, "stages: 0"),
    ({"stages": 3}, r"stages: a model of 2 blocks"),  # micro has 2 blocks
    ({"microbatches": 4}, "microbatches apply to a staged run"),
    ({"stages": 2, "microbatches": 3}, "does not divide"),
    ({"stages": 2, "stage_classes": [[]]}, "1 lists for 2 stages"),
    ({"stages": 2, "fan_in": 2, "compute": {"aggregation": "exact-sum-v1"}}, "aggregates each stage flat"),
    ({"preset": "llama-micro", "model": {"tie_embeddings": True}, "stages": 2}, "tie_embeddings = false"),
])
def test_stage_fields_that_cannot_hold_are_refused_before_anything_starts(training, needle):
    with pytest.raises(ConfigError, match=needle):
        _setup(**training)


def test_a_stage_class_outside_the_runs_classes_is_refused():
    run_profile = training_spec(RunConfig()).profile
    profile, stranger = asdict(run_profile), asdict(replace(run_profile, threads=7))
    with pytest.raises(ConfigError, match="not among"):
        _setup(stages=2, stage_classes=[[profile], [stranger]])
    with pytest.raises(ConfigError, match="twice"):
        _setup(stages=2, stage_classes=[[profile, profile], [profile]])


def test_a_staged_run_whose_class_stage_pairs_overflow_the_chains_class_set_is_refused():
    profile = training_spec(RunConfig()).profile
    nine = [asdict(replace(profile, threads=t)) for t in range(1, 10)]  # the run's profile first
    assert _setup(classes=nine).chain_classes == 9  # unstaged: one bit per class, as before
    with pytest.raises(StageClassesOverflow, match="18 .* pairs"):  # 2 stages x 9 classes > 16 bits
        _setup(stages=2, classes=nine)
    assert _setup(stages=2, classes=nine, stage_classes=[nine, nine[:7]]).chain_classes == 16
