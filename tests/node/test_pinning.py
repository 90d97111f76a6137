"""Deploy pins what nodes must reproduce, and writes the aggregation rule out."""

from __future__ import annotations

import pytest

from protocol.config.run_config import RunConfig
from protocol.node.pinning import prepare


@pytest.mark.parametrize("given,pinned", [({}, "exact-sum-v1"), ({"aggregation": "float32-v1"}, "float32-v1")])
def test_the_aggregation_rule_is_written_into_the_deployed_config(given, pinned):
    """A later release that changes the default rule cannot change a deployed run's model."""
    config = prepare(RunConfig(training={"preset": "micro", "compute": {"inner_steps": 6, **given}}))
    assert config.training["compute"] == {"inner_steps": 6, "aggregation": pinned}
    assert config.training["model_config_hash"] and config.genesis_model_hash
    # so are the consensus parameters, at the defaults run.toml left them
    assert (config.training["selection"], config.training["top_g"], config.training["heldout_batches"]) == (
        "top-consensus-v1", 16_384, 8)
