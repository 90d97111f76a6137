"""One node per account and per data dir, and every input error before any side effect: real
`veritrain miner` processes on anvil, as an operator runs them.

A second process with the same keys is refused before it sends anything (a live twin proves the
account's registered key at the registered address), a second process on the same data dir is
refused by the lock, and `--move` takes the account over on purpose: the node it replaces stops.
Each bad input is reported with nothing sent to the chain, no worker started and no file but
the data dir's lock written."""

from __future__ import annotations

import json
import signal
import socket
from pathlib import Path

import pytest

from protocol.node.data_dir_lock import LOCK_FILE
from tests.conftest import run_cli
from tests.integration.netutil import (
    PASSWORD,
    WAITING,
    deploy_with_keys,
    micro_run_toml,
    reader,
    sent_calls,
    start_node,
    wait_for_line,
)

pytestmark = pytest.mark.anvil


@pytest.fixture(scope="module")
def chain(anvil, tmp_path_factory) -> tuple[str, Path, list[Path], list[str]]:
    tmp = tmp_path_factory.mktemp("account")
    dep, keys, accounts = deploy_with_keys(anvil.url, tmp, 2, micro_run_toml("one-node", 60))
    return anvil.url, dep, keys, accounts


def _miner(url: str, dep: Path, keys: Path, data: Path, *extra: str, env: dict[str, str] | None = None):
    return run_cli("miner", "--rpc", url, "--deployment", str(dep), "--keys", str(keys), "--data-dir", str(data),
                   "--log-format", "text", *extra, env={"VERITRAIN_PASSWORD": PASSWORD, **(env or {})})


def _error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("error:")]


def _nothing_started(stderr: str, data: Path) -> None:
    assert "starting the worker" not in stderr and "registering" not in stderr, stderr
    assert not data.exists() or [p.name for p in data.iterdir()] == [LOCK_FILE], list(data.iterdir())


def test_a_twin_and_a_shared_data_dir_are_refused_and_move_hands_the_account_over(chain, tmp_path: Path) -> None:
    url, dep, keys, accounts = chain
    client = reader(url, dep)
    first_log = tmp_path / "first.log"
    first = start_node("miner", url, dep, keys[0], tmp_path / "a", 5, ["--stake", "150"], first_log)
    try:
        wait_for_line(first, first_log, WAITING)
        sent = len(sent_calls(client, accounts[0]))

        twin = _miner(url, dep, keys[0], tmp_path / "b")  # same keys, a fresh data dir: the case that hurt
        assert twin.code == 1 and len(_error_lines(twin.stderr)) == 1, twin.stderr
        assert "already served by a live node" in twin.stderr and "twin started with the same keys" in twin.stderr
        _nothing_started(twin.stderr, tmp_path / "b")

        shared = _miner(url, dep, keys[0], tmp_path / "a")  # the running node's own data dir
        assert shared.code == 1 and f"in use by another node (pid {first.pid})" in shared.stderr, shared.stderr
        assert len(sent_calls(client, accounts[0])) == sent  # neither sent a transaction

        second_log = tmp_path / "second.log"
        second = start_node("miner", url, dep, keys[0], tmp_path / "b", 5, ["--move"], second_log)
        try:
            wait_for_line(second, second_log, "moving the registration")
            assert first.wait(timeout=60) == 1  # the replaced node sees the new binding and stops
            assert "by another node (--move); this node stops serving it" in first_log.read_text()
            wait_for_line(second, second_log, WAITING)
            assert client.call("staking", "multiaddr", accounts[0]) in second_log.read_text()
        finally:
            second.send_signal(signal.SIGTERM)
            second.wait(timeout=30)
    finally:
        if first.poll() is None:
            first.send_signal(signal.SIGTERM)
            first.wait(timeout=30)


def _silent_rpc() -> socket.socket:
    server = socket.socket()  # accepts connections (the backlog) and never answers
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    return server


@pytest.mark.parametrize("case", ["stake", "stake below minimum", "stake beyond tokens", "listen", "scheme", "dead rpc",
                                  "silent rpc", "password", "class"])
def test_every_input_error_comes_before_any_side_effect(chain, tmp_path: Path, case: str) -> None:
    url, dep, keys, accounts = chain
    data, extra, env = tmp_path / "data", [], {}
    expected = {
        "stake": "token amount must be positive", "stake below minimum": "is below the run's minimum miner stake",
        "stake beyond tokens": "needs 5000 more tokens, and account", "listen": "--listen 'localhost:4001' is not a multiaddr",
        "scheme": "needs its scheme: http://127.0.0.1", "dead rpc": "cannot reach RPC node",
        "silent rpc": "within 10 s", "password": "wrong password", "class": "is not permitted by this run",
    }[case]
    rpc = url
    with _silent_rpc() as silent:
        if case.startswith("stake"):
            extra = ["--stake", {"stake": "-5", "stake below minimum": "50", "stake beyond tokens": "5000"}[case]]
        elif case == "listen":
            extra = ["--listen", "localhost:4001"]
        elif case == "scheme":
            rpc = url.removeprefix("http://")
        elif case == "dead rpc":
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                rpc = f"http://127.0.0.1:{s.getsockname()[1]}"
        elif case == "silent rpc":
            rpc = f"http://127.0.0.1:{silent.getsockname()[1]}"
        elif case == "password":
            env = {"VERITRAIN_PASSWORD": "not the password"}
        else:
            extra = ["--hardware-class", "no-such-class"]
        result = run_cli("miner", "--rpc", rpc, "--deployment", str(dep), "--keys", str(keys[1]), "--data-dir",
                         str(data), "--log-format", "text", *extra, env={"VERITRAIN_PASSWORD": PASSWORD, **env})
    assert result.code in (1, 2) and len(_error_lines(result.stderr)) == 1, result.stderr
    assert expected in result.stderr and "Traceback" not in result.stderr, result.stderr
    _nothing_started(result.stderr, data)
    assert reader(url, dep).w3.eth.get_transaction_count(accounts[1]) == 0  # nothing sent, ever


def test_an_input_error_off_a_terminal_is_a_json_line_like_every_other(chain, tmp_path: Path) -> None:
    url, dep, keys, _ = chain
    result = run_cli("miner", "--rpc", url, "--deployment", str(dep), "--keys", str(keys[1]), "--data-dir",
                     str(tmp_path / "data"), env={"VERITRAIN_PASSWORD": "not the password"})  # stderr is a pipe
    assert result.code == 1, result.stderr
    lines = [json.loads(line) for line in result.stderr.splitlines()]  # every line is JSON
    assert lines[-1]["level"] == "ERROR" and lines[-1]["event"].startswith("error: cannot decrypt"), lines
    assert sum(r["level"] == "ERROR" for r in lines) == 1
