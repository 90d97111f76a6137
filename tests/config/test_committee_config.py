"""A run with check committees must keep the detection of a one-segment fake (docs/PROTOCOL.md
§10.8): its q is refused below what committees of its size need, before anything is deployed."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from protocol.config.run_config import ChainParams, RunConfig
from protocol.config.run_setup import resolve
from protocol.core.errors import ConfigError


@pytest.mark.parametrize(("committee", "q"), [(3, 1), (5, 1)])
def test_committees_with_too_few_segments_per_check_are_refused(committee: int, q: int) -> None:
    config = RunConfig(chain=ChainParams(committee=committee), training={"compute": {"segments_per_validator": q}})
    with pytest.raises(ConfigError, match="segments_per_validator >= 2"):
        resolve(config)


@pytest.mark.parametrize(("committee", "q"), [(0, 1), (3, 2), (7, 2)])
def test_committees_that_keep_the_detection_are_accepted(committee: int, q: int) -> None:
    config = RunConfig(chain=ChainParams(committee=committee), training={"compute": {"segments_per_validator": q}})
    assert resolve(config).compute.segments_per_validator == q


def test_a_committee_larger_than_the_chain_bounds_is_refused() -> None:
    with pytest.raises(ValidationError, match="less than or equal to 16"):
        ChainParams(committee=17)
