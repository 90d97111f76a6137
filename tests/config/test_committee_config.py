"""A run with check committees must keep the detection of a one-segment fake (docs/PROTOCOL.md
§10.8): its q is refused below what committees of its size need, before anything is deployed.
A committee is in force only over more deciders than seats, so the fewest it decides among is
c + 1; three validators checking at q = 1 are the reference, met at q = 1 from c = 3."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from protocol.config.run_config import EVERY_HOLDER_PERMITS, ChainParams, RunConfig
from protocol.config.run_setup import resolve
from protocol.core.errors import ConfigError
from protocol.core.settlement.result_inputs import MAX_VALIDATORS


@pytest.mark.parametrize(("committee", "q"), [(1, 1), (2, 1)])
def test_committees_with_too_few_segments_per_check_are_refused(committee: int, q: int) -> None:
    config = RunConfig(chain=ChainParams(committee=committee), training={"compute": {"segments_per_validator": q}})
    with pytest.raises(ConfigError, match="segments_per_validator >= 2"):
        resolve(config)


@pytest.mark.parametrize(("committee", "q"), [(0, 1), (1, 2), (2, 2), (3, 1), (7, 1), (16, 1)])
def test_committees_that_keep_the_detection_are_accepted(committee: int, q: int) -> None:
    config = RunConfig(chain=ChainParams(committee=committee), training={"compute": {"segments_per_validator": q}})
    assert resolve(config).compute.segments_per_validator == q


def test_a_committee_larger_than_the_chain_bounds_is_refused() -> None:
    with pytest.raises(ValidationError, match="less than or equal to 16"):
        ChainParams(committee=17)


def test_the_default_run_has_committees_of_three_at_one_segment_per_check() -> None:
    config = RunConfig()
    assert config.chain.committee == 3
    assert resolve(config).compute.segments_per_validator == 1


def test_every_committee_in_force_catches_a_fake_as_often_as_three_validators_that_all_check() -> None:
    """The smallest network a committee of c is in force in, c + 1 equal validators, and larger ones."""
    from protocol.core.settlement.committee_odds import (
        committee_per_check,
        p_catches_one_segment,
        p_committee_catches,
    )

    reference = p_catches_one_segment(10, 1, 3)
    for size in (1, 2, 3, 5, 7):
        q = committee_per_check(size, 10)
        for validators in (size + 1, size + 2, 2 * size + 1):
            assert p_committee_catches([1] * validators, size, 10, q) >= reference, (size, validators)
        assert q == 1 or p_committee_catches([1] * (size + 1), size, 10, q - 1) < reference


def test_a_run_without_committees_permits_at_most_sixteen_validators() -> None:
    """A column challenge carries the reveal of each validator that decides the column: without
    committees that is every holder, so a run without them is refused above 16 permits (the
    contracts' MAX_COMMITTEE), before anything is deployed; committees lift the bound to the
    contracts' MAX_VALIDATORS."""
    assert ChainParams(committee=0, max_validator_permits=EVERY_HOLDER_PERMITS).committee == 0
    with pytest.raises(ValidationError, match="committee >= 1 to permit more validators"):
        ChainParams(committee=0, max_validator_permits=EVERY_HOLDER_PERMITS + 1)
    assert ChainParams(committee=3, max_validator_permits=MAX_VALIDATORS).max_validator_permits == MAX_VALIDATORS
    with pytest.raises(ValidationError):
        ChainParams(max_validator_permits=MAX_VALIDATORS + 1)
