"""Helpers for tests that run nodes as OS processes through the CLI, on anvil."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from protocol.chain.backend import connect
from protocol.chain.client import ChainClient
from protocol.chain.deployment import load_deployment
from protocol.node.keys import new_keys
from tests.conftest import REPO, free_port, run_cli

PASSWORD = "network test"
WAITING = "waiting for `veritrain start`"  # a node is up and waits for round 0


def micro_run_toml(run_name: str, commit_duration: int) -> str:
    """A run config for CLI network tests: micro model, short rounds (12 steps, 4 segments)."""
    return f"""
run_name = "{run_name}"
[chain]
commit_duration = {commit_duration}
score_duration = 120
reveal_duration = 60
challenge_window = 15
result_duration = 60
result_challenge_window = 5
unbonding_delay = 1000
[training]
preset = "micro"
[training.compute]
inner_steps = 12
checkpoint_every = 3
"""


def deploy_with_keys(rpc_url: str, tmp: Path, n_nodes: int, run_toml: str) -> tuple[Path, list[Path], list[str]]:
    """Write the run config, make `n_nodes` key dirs, deploy and fund them: (deployment, key dirs, accounts)."""
    (tmp / "run.toml").write_text(run_toml)
    key_dirs = [tmp / f"keys{i}" for i in range(n_nodes)]
    addresses = [new_keys(d, PASSWORD, kdf_iterations=2)[0] for d in key_dirs]
    dep = tmp / "deployment.json"
    funding = [a for addr in addresses for a in ("--fund", addr)]
    deployed = run_cli("deploy", "--rpc", rpc_url, "--dev-account", "--config", str(tmp / "run.toml"),
                       "--out", str(dep), "--fund-tokens", "1000", *funding)
    assert deployed.code == 0, deployed.stderr
    return dep, key_dirs, addresses


def start_node(role: str, rpc_url: str, dep: Path, keys: Path, data: Path, rounds: int, extra: list[str],
               log: Path) -> subprocess.Popen:
    """`veritrain miner|validator ...` in its own process group, so that killing the group
    also kills its training worker, as a crash of the machine would."""
    args = [sys.executable, "-m", "protocol.cli.app", role, "--rpc", rpc_url, "--deployment", str(dep), "--keys",
            str(keys), "--data-dir", str(data), "--max-rounds", str(rounds), *extra]
    # the tests read the logs as a person would: the text format, not JSON lines (stderr is a file)
    env = {**os.environ, "VERITRAIN_PASSWORD": PASSWORD, "VERITRAIN_LOG_FORMAT": "text"}
    return subprocess.Popen(args, cwd=REPO, env=env, stdout=log.open("a"), stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, start_new_session=True)


def wait_for_line(proc: subprocess.Popen, log: Path, text: str, timeout_s: float = 120) -> None:
    """Until `text` is in the node's log; fails at once if the node exits first."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if text in log.read_text():
            return
        if proc.poll() is not None:
            pytest.fail(f"node exited ({proc.returncode}) before {text!r}:\n{log.read_text()[-3000:]}")
        time.sleep(0.2)
    pytest.fail(f"no {text!r} within {timeout_s} s:\n{log.read_text()[-3000:]}")


def kill_group(proc: subprocess.Popen, sig: int = signal.SIGKILL) -> None:
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass


def stop_all(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        if p.poll() is None:
            p.terminate()
    for p in procs:
        try:
            p.wait(timeout=15)
        except subprocess.TimeoutExpired:
            kill_group(p)
            p.wait(timeout=15)
        kill_group(p)  # a worker left behind by a node that was killed


def wait_for(predicate: Callable[[], bool], timeout_s: float, what: str, procs: list[subprocess.Popen],
             logs: list[Path]) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        dead = [p for p in procs if p.poll() not in (None, 0, -signal.SIGKILL)]
        if dead:
            pytest.fail(f"a node process died while waiting for {what}:\n{log_tails(logs)}")
        time.sleep(0.5)
    pytest.fail(f"timed out waiting for {what}:\n{log_tails(logs)}")


def log_tails(logs: list[Path], chars: int = 1500) -> str:
    return "\n".join(f"--- {log.name}\n{log.read_text()[-chars:]}" for log in logs if log.exists())


def reader(rpc_url: str, dep: Path) -> ChainClient:
    return ChainClient(connect(rpc_url), load_deployment(dep))


def inspect(rpc_url: str, dep: Path, *view: str) -> dict:
    """`veritrain inspect VIEW --json`'s data, run in this process: the networks read it dozens of
    times, and a CLI process each costs seconds (tests/integration/test_anvil_round.py runs the
    real command in its own process)."""
    from typer.testing import CliRunner

    from protocol.cli.app import app

    result = CliRunner().invoke(app, ["inspect", *view, "--rpc", rpc_url, "--deployment", str(dep), "--json"])
    assert result.exit_code == 0, (result.stderr, result.exception)
    return json.loads(result.stdout)["data"]


def sent_calls(client: ChainClient, account: str) -> list[tuple[str, dict, int]]:
    """Every transaction `account` sent to the deployment, decoded: (function, args, receipt status)."""
    w3 = client.w3
    deployed = (client.rounds, client.scores, client.rewards, client.results, client.keys, client.column_challenges,
                client.tree_challenges, client.account_challenges, client.claims_challenges, client.staking, client.disputes, client.token)
    contracts = {c.address.lower(): c for c in deployed}
    calls = []
    for number in range(w3.eth.block_number + 1):
        for tx in w3.eth.get_block(number, full_transactions=True)["transactions"]:
            to = (tx.get("to") or "").lower()
            if tx["from"].lower() != account.lower() or to not in contracts:
                continue
            fn, args = contracts[to].decode_function_input(tx["input"])
            status = w3.eth.get_transaction_receipt(tx["hash"])["status"]
            calls.append((fn.fn_name, dict(args), status))
    return calls


class TcpRelay:
    """A loopback TCP relay in front of the RPC endpoint that the test can take down and
    bring back on the same port, as an RPC provider outage looks to a node."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = free_port()
        self._conns: list[socket.socket] = []
        self._lock = threading.Lock()
        self._server: socket.socket | None = None
        self._acceptor: threading.Thread | None = None
        self.up()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def up(self) -> None:
        server = socket.socket()
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", self.port))
        server.listen(64)
        self._server = server
        self._acceptor = threading.Thread(target=self._accept, args=(server,), daemon=True)
        self._acceptor.start()

    def down(self) -> None:
        """Refuse new connections and cut the open ones; returns once the accept loop has
        ended, so nothing is relayed after it."""
        with self._lock:
            server, self._server = self._server, None
            conns, self._conns = self._conns, []
            acceptor, self._acceptor = self._acceptor, None
        if server is not None:
            # shutdown wakes the accept() blocked in _accept: a bare close() leaves it
            # blocked on the still-listening socket, and it would relay the next client
            # straight through the outage
            with contextlib.suppress(OSError):
                server.shutdown(socket.SHUT_RDWR)
            server.close()
        if acceptor is not None:
            acceptor.join(timeout=10)
            assert not acceptor.is_alive(), "the relay's accept loop did not end"
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
            conn.close()

    def _accept(self, server: socket.socket) -> None:
        while True:
            try:
                client, _ = server.accept()
            except OSError:
                return  # shut down by down()
            upstream = socket.create_connection(("127.0.0.1", self.target_port), timeout=10)
            upstream.settimeout(None)
            with self._lock:
                if self._server is not server:  # went down while this client was accepted
                    client.close()
                    upstream.close()
                    return
                self._conns += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                dst.sendall(data)
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)
