"""`inspect` on the embedded chain: a round that does not exist is an error, hashes carry 0x,
deadlines read as local times with the time left, amounts are exact."""

from __future__ import annotations

import json
import re

import pytest
import typer

from protocol.chain.backend import connect, dev_account
from protocol.chain.client import ChainClient
from protocol.chain.deploy import deploy
from protocol.chain.scripted import join_network
from protocol.cli.app import one_line_errors, show
from protocol.config.run_config import RunConfig
from protocol.core.errors import ConfigError

HEX = re.compile(r"^0x[0-9a-f]*$")


@pytest.fixture(scope="module")
def chain() -> ChainClient:
    handle = connect(None)
    return ChainClient(handle, deploy(handle, dev_account(handle), RunConfig()), dev_account(handle))


def test_no_round_exists_before_start(chain: ChainClient) -> None:
    with pytest.raises(ConfigError, match="round 0 does not exist"):
        show(chain, "round", "0", as_json=True)


def test_summary_json_hashes_carry_0x(chain: ChainClient, capsys: pytest.CaptureFixture[str]) -> None:
    show(chain, "summary", None, as_json=True)
    data = json.loads(capsys.readouterr().out)["data"]
    assert HEX.match(data["run_config_hash"]) and len(data["run_config_hash"]) == 66


def test_rounds_after_start(chain: ChainClient, capsys: pytest.CaptureFixture[str]) -> None:
    join_network(chain, 1, 1, lambda _line: None)
    chain.start()
    capsys.readouterr()

    @one_line_errors
    def inspect_round(n: str, as_json: bool) -> None:
        show(chain, "round", n, as_json)

    for as_json in (False, True):  # one line and exit 1 in both forms
        with pytest.raises(typer.Exit) as info:
            inspect_round("999", as_json)
        assert info.value.exit_code == 1
        out = capsys.readouterr()
        assert out.out == "" and out.err.strip() == "error: round 999 does not exist (current round: 0)"

    show(chain, "round", "0", as_json=True)
    data = json.loads(capsys.readouterr().out)["data"]
    for key in ("seed", "model_hash", "next_model_hash"):
        assert HEX.match(data[key]), key
    show(chain, "round", "0", as_json=False)
    text = capsys.readouterr().out
    assert re.search(r"commit deadline\s+│?\s*\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \S+ \(in \d+ min", text), text


def test_bad_round_argument_is_a_usage_error(chain: ChainClient, capsys: pytest.CaptureFixture[str]) -> None:
    @one_line_errors
    def inspect_round() -> None:
        show(chain, "round", "abc", True)

    with pytest.raises(typer.Exit) as info:
        inspect_round()
    assert info.value.exit_code == 2
    assert capsys.readouterr().err.strip() == "error: round must be a number, got 'abc'"
