"""Shared fixtures: a real anvil node and a way to run the CLI as a user would."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests

from protocol.chain import evm_precompiles

REPO = Path(__file__).resolve().parents[1]
ANVIL_NPM_PATH = REPO / "node_modules" / "@foundry-rs" / "anvil-linux-amd64" / "bin" / "anvil"


def _load_training_fixtures() -> None:
    """tests/core/fixtures_training.py, importable as `fixtures_training` from every test
    folder (this conftest is loaded before any test module)."""
    import importlib.util

    if "fixtures_training" in sys.modules:
        return
    path = REPO / "tests" / "core" / "fixtures_training.py"
    spec = importlib.util.spec_from_file_location("fixtures_training", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["fixtures_training"] = module
    spec.loader.exec_module(module)


_load_training_fixtures()
evm_precompiles.install()  # boa's worlds too: py-evm's BLS12-381 precompiles, sooner (protocol/chain/evm_precompiles.py)


# The files that run whole networks, slowest first. pytest runs with two xdist workers that take
# whole files in this order (`-n 2 --dist loadfile --no-loadscope-reorder` in pyproject.toml): one
# worker starts on the three largest networks, which it runs in turn (below), the other on the
# next longest, and the short files fill in around them, so they finish close together. Reorder
# when `--durations` shows a new order; a file not listed runs after these, in collection order.
# Seconds: one full run of the suite with two workers on a 2-core machine (December 2026).
NETWORKS_SLOWEST_FIRST = (
    "tests/integration/test_churn_soak.py",  # 351: 5 rounds, 13 CLI nodes, churn and faults
    "tests/integration/test_devnet_committees.py",  # 18 nodes (the devnet's estimate: 87 s idle)
    "tests/integration/test_devnet_tree.py",  # 15 nodes
    "tests/integration/test_devnet.py",  # 285 (150-285: an audit of an unserved checkpoint waits)
    "tests/integration/test_devnet_classes.py",  # 195
    "tests/contracts/test_caps.py",  # 104: 64 proofs of possession in py-evm
    "tests/integration/test_devnet_stages.py",  # 110-125: two stages, two pipelines, four validators
    "tests/integration/test_devnet_capacity.py",  # 103
    "tests/integration/test_across_machines.py",  # 100: three namespaces, three rounds, an export
    "tests/integration/test_anvil_stages.py",  # 87: four CLI nodes, a stage killed mid-round
    "tests/integration/test_stage_miners.py",  # 80: two rounds of two stage miners and a validator
    "tests/integration/test_one_node_per_account.py",  # 60
    "tests/integration/test_devnet_llama.py",  # 61
    "tests/benchmarks/test_scale.py",  # 57
    "tests/cli/test_export.py",  # 46
    "tests/explorer/test_explorer_browser.py",
    "tests/integration/test_node_stop.py",
)

# The three largest networks (13 to 19 nodes, each node with its own worker process) are one
# unit of work for xdist, so one worker runs them one after another. When all three ran at once
# (they ran last, on three workers) two cores carried a load of 13 to 16 and 20 of 24 GiB were
# in use; their phases overran their deadlines and CI failed (December 2026).
LARGEST_NETWORKS = frozenset(NETWORKS_SLOWEST_FIRST[:3])


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {path: i for i, path in enumerate(NETWORKS_SLOWEST_FIRST)}
    items.sort(key=lambda item: rank.get(_file_of(item), len(rank)))  # stable: the rest keep their order


def _file_of(nodeid: str | pytest.Item) -> str:
    return (nodeid if isinstance(nodeid, str) else nodeid.nodeid).split("::", 1)[0]


@pytest.hookimpl(tryfirst=True)  # before xdist's own scheduler for `--dist loadfile`
def pytest_xdist_make_scheduler(config: pytest.Config, log):  # noqa: ANN001 (xdist's Producer)
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class LargestNetworksInTurn(LoadFileScheduling):
        """Whole files per worker, the largest networks one unit between them."""

        def _split_scope(self, nodeid: str) -> str:
            return "largest-networks" if _file_of(nodeid) in LARGEST_NETWORKS else super()._split_scope(nodeid)

    return LargestNetworksInTurn(config, log)


def anvil_binary() -> str | None:
    for candidate in (os.environ.get("VERITRAIN_ANVIL"), str(ANVIL_NPM_PATH), shutil.which("anvil")):
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Anvil:
    url: str
    process: subprocess.Popen

    def stop(self) -> None:
        stop_process(self.process)  # the real anvil binary, not an npm shim: this PID is the node


def stop_process(proc: subprocess.Popen) -> None:
    """Terminate, and kill if it has not exited within 10 s."""
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


def missing_tool(message: str, require_var: str) -> None:
    """A test's external tool is missing: fail under CI (CI=true or `require_var`=1), else skip."""
    if os.environ.get(require_var) == "1" or os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


def start_anvil() -> Anvil:
    binary = anvil_binary()
    if binary is None:
        missing_tool("anvil not found: run `npm install @foundry-rs/anvil@1.7.1` (done by .ci/run)",
                     "VERITRAIN_REQUIRE_ANVIL")
    # port 0: anvil binds a free port itself, read back from the process's listening socket
    # (a port picked here could be taken by another xdist worker's anvil before this one binds)
    proc = subprocess.Popen([binary, "--host", "127.0.0.1", "--port", "0", "--silent"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and proc.poll() is None:
        port = _listening_port(proc.pid)
        if port is not None:
            url = f"http://127.0.0.1:{port}"
            try:
                requests.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "eth_chainId", "params": []}, timeout=1)
                return Anvil(url, proc)
            except requests.RequestException:
                pass
        time.sleep(0.2)
    stop_process(proc)
    pytest.fail("anvil did not start")


def _listening_port(pid: int) -> int | None:
    import psutil

    try:
        conns = psutil.Process(pid).net_connections(kind="tcp")
    except psutil.NoSuchProcess:  # exited: the caller sees it
        return None
    ports = [c.laddr.port for c in conns if c.status == psutil.CONN_LISTEN]
    return ports[0] if ports else None


@pytest.fixture(scope="session")
def anvil() -> Iterator[Anvil]:
    node = start_anvil()
    yield node
    node.stop()


KNOT_PATHS = ("/usr/sbin/knotd", "/usr/bin/knotd")


def knotd_binary() -> str | None:
    for candidate in (os.environ.get("VERITRAIN_KNOTD"), shutil.which("knotd"), *KNOT_PATHS):
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


@dataclass
class Knot:
    """A real authoritative Knot DNS server on 127.0.0.1, serving the zones given to `serve`."""

    binary: str
    root: Path
    process: subprocess.Popen | None = None
    port: int = 0

    def serve(self, domain: str, records: str) -> tuple[str, int]:
        """Start knotd with one zone: an SOA and NS at `domain`, then `records` (absolute
        names). Returns (host, port) once it answers the SOA."""
        import dns.exception
        import dns.resolver

        self.stop()
        self.port = free_port()
        zone = self.root / "zone.db"
        zone.write_text(f"$TTL 60\n{domain}. SOA ns.{domain}. admin.{domain}. 1 3600 600 86400 60\n"
                        f"{domain}. NS ns.{domain}.\nns.{domain}. A 127.0.0.1\n{records}")
        conf = self.root / "knot.conf"
        conf.write_text(f'server:\n    rundir: "{self.root}"\n    listen: 127.0.0.1@{self.port}\n'
                        f'    pidfile: "{self.root}/knot.pid"\ndatabase:\n    storage: "{self.root}"\n'
                        f'log:\n  - target: stderr\n    any: error\n'
                        f'zone:\n  - domain: {domain}.\n    file: "{zone}"\n')
        self.process = subprocess.Popen([self.binary, "-c", str(conf)], stdout=subprocess.DEVNULL,
                                        stderr=open(self.root / "knotd.log", "w"))  # noqa: SIM115
        resolver = dns.resolver.Resolver(configure=False)
        resolver.nameservers, resolver.port = ["127.0.0.1"], self.port
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and self.process.poll() is None:
            try:
                resolver.resolve(f"{domain}.", "SOA", lifetime=0.5)
                return "127.0.0.1", self.port
            except dns.exception.DNSException:
                time.sleep(0.1)
        log = (self.root / "knotd.log").read_text()
        self.stop()
        pytest.fail(f"knotd did not answer on port {self.port}: {log[-2000:]}")

    def stop(self) -> None:
        if self.process is not None:
            stop_process(self.process)
            self.process = None


@pytest.fixture
def knot(tmp_path: Path) -> Iterator[Knot]:
    """A Knot DNS server of this test's own (not the system service). Skipped without knotd,
    except under CI (CI=true or VERITRAIN_REQUIRE_KNOT=1), where a missing knotd fails."""
    binary = knotd_binary()
    if binary is None:
        missing_tool("knotd not found: apt-get install knot (done by .ci/run)", "VERITRAIN_REQUIRE_KNOT")
    root = tmp_path / "knot"
    root.mkdir()
    server = Knot(binary, root)
    yield server
    server.stop()


@dataclass
class CliResult:
    code: int
    stdout: str
    stderr: str


def run_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 300) -> CliResult:
    """Run `veritrain ARGS` in a subprocess, as a user would."""
    full_env = {**os.environ, "COLUMNS": "200", **(env or {})}
    proc = subprocess.run([sys.executable, "-m", "protocol.cli.app", *args], capture_output=True, text=True,
                          env=full_env, timeout=timeout, cwd=REPO, stdin=subprocess.DEVNULL)
    return CliResult(proc.returncode, proc.stdout, proc.stderr)
