"""examples/run.toml, the README's quick first run, loads, validates and keeps unbonding short."""

from __future__ import annotations

from protocol.config.run_config import load_run_config
from protocol.config.run_setup import training_spec
from tests.conftest import REPO

EXAMPLE = REPO / "examples" / "run.toml"


def test_the_example_run_config_is_small_and_valid() -> None:
    config = load_run_config(EXAMPLE)
    spec = training_spec(config)
    assert spec.preset == "micro"
    chain = config.chain
    assert chain.round_span() < chain.unbonding_delay <= 600  # withdrawable within 10 minutes of unbond
    assert chain.class_stake <= 300  # the README's one validator (stake 300) checks its class exactly
    assert str(EXAMPLE.relative_to(REPO)) in (REPO / "README.md").read_text()
