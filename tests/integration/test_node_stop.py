"""A node as an operator runs it: quick input errors, a clean stop on SIGTERM / Ctrl-C with no
process left behind, and a restart that resumes without re-registering or re-staking what
was unbonded. Real `veritrain miner` processes on anvil."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

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

STOP_LIMIT_S = 10.0


@pytest.fixture(scope="module")
def chain(anvil, tmp_path_factory) -> tuple[str, Path, Path, str]:
    tmp = tmp_path_factory.mktemp("stop")
    dep, keys, accounts = deploy_with_keys(anvil.url, tmp, 1, micro_run_toml("node-stop", 60))
    return anvil.url, dep, keys[0], accounts[0]


def _node_args(url: str, dep: Path, keys: Path, data: Path) -> list[str]:
    return ["miner", "--rpc", url, "--deployment", str(dep), "--keys", str(keys), "--data-dir", str(data)]


@pytest.mark.parametrize("case", ["missing deployment", "wrong password"])
def test_input_errors_come_first_and_fast(chain, tmp_path: Path, case: str) -> None:
    url, dep, keys, _ = chain
    deployment = tmp_path / "absent.json" if case == "missing deployment" else dep
    password = PASSWORD if case == "missing deployment" else "not the password"
    result = run_cli(*_node_args(url, deployment, keys, tmp_path / "data"), "--log-format", "text",
                     env={"VERITRAIN_PASSWORD": password})
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert result.code == 1, result.stderr
    assert len(errors) == 1 and "Traceback" not in result.stderr, result.stderr
    assert ("not found" in errors[0]) if case == "missing deployment" else ("wrong password" in errors[0])
    # before anything slow: no worker (torch) started, no corpus loaded (how fast that is on a
    # given machine is a figure, not a test: it is in the closing note)
    assert "starting the worker" not in result.stderr and "loading data" not in result.stderr, result.stderr
    assert not (tmp_path / "data").exists()  # bad input leaves no state behind


def _run_until_waiting(chain, data: Path, log: Path, stake: str) -> tuple[subprocess.Popen, list[int]]:
    """A miner up to the point where it waits for `veritrain start`, and every process it runs."""
    url, dep, keys, _ = chain
    proc = start_node("miner", url, dep, keys, data, 5, ["--stake", stake], log)
    wait_for_line(proc, log, WAITING)
    tree = [p.pid for p in psutil.Process(proc.pid).children(recursive=True)]
    assert tree, "the node runs a worker process"
    return proc, tree


def _stop(proc: subprocess.Popen, sig: signal.Signals, log: Path, tree: list[int]) -> float:
    began = time.monotonic()
    if sig == signal.SIGINT:
        os.killpg(proc.pid, sig)  # as a terminal's Ctrl-C: the whole foreground group gets it
    else:
        proc.send_signal(sig)  # as `kill PID`
    try:
        proc.wait(timeout=STOP_LIMIT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        pytest.fail(f"{sig.name} did not stop the node within {STOP_LIMIT_S} s:\n{log.read_text()[-3000:]}")
    took = time.monotonic() - began
    text = log.read_text()
    assert text.count("stopping:") == 1 and f"stopping: {sig.name}" in text, text[-3000:]
    assert "Traceback" not in text and "ExceptionGroup" not in text, text[-3000:]
    left = [pid for pid in tree if psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE]
    assert not left, f"left running after {sig.name}: {[psutil.Process(p).cmdline()[:3] for p in left]}"
    return took


@pytest.mark.slow
def test_sigterm_stops_cleanly_and_a_restart_resumes_without_restaking_the_unbonded(chain, tmp_path: Path) -> None:
    url, dep, keys, account = chain
    data, client = tmp_path / "data", reader(url, dep)
    proc, tree = _run_until_waiting(chain, data, tmp_path / "first.log", "150")
    assert proc.returncode is None
    _stop(proc, signal.SIGTERM, tmp_path / "first.log", tree)
    assert proc.returncode == 0
    assert client.call("staking", "staked", account) == 150 * 10**18

    unbond = run_cli("unbond", "50", "--rpc", url, "--deployment", str(dep), "--keys", str(keys),
                     env={"VERITRAIN_PASSWORD": PASSWORD})
    assert unbond.code == 0, unbond.stderr
    sent_before = len(sent_calls(client, account))

    second = tmp_path / "second.log"
    proc, tree = _run_until_waiting(chain, data, second, "150")  # the very same command
    text = second.read_text()
    assert "registration found" in text and "stake in place" in text, text
    assert client.call("staking", "staked", account) == 100 * 10**18
    assert client.call("staking", "unbonding", account) == 50 * 10**18
    assert [c[0] for c in sent_calls(client, account)[sent_before:]] == []  # no register, no stake
    _stop(proc, signal.SIGINT, second, tree)
    assert proc.returncode == 130


ORPHAN_SCRIPT = """
import sys
from protocol.core.hardware.replay_profile import ReplayProfile
from protocol.node.worker_pool import ProfileWorker
worker = ProfileWorker(ReplayProfile()).ready()
print(list(worker._pool._processes)[0], flush=True)
sys.stdin.read()
"""


def test_a_worker_whose_node_was_sigkilled_exits_by_itself(tmp_path: Path) -> None:
    """A SIGKILLed node runs no clean-up: its worker notices the parent is gone and exits."""
    node = subprocess.Popen([sys.executable, "-c", ORPHAN_SCRIPT], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True, cwd=Path(__file__).resolve().parents[2])
    assert node.stdout is not None
    worker = psutil.Process(int(node.stdout.readline()))
    node.kill()
    node.wait()
    _, alive = psutil.wait_procs([worker], timeout=5)
    assert not alive, "the worker outlived its SIGKILLed node"
