"""A network of machines for tests: namespaces on a bridge (`netns.Lab`) and anvil on the bridge's
address, where every machine reaches it as a chain endpoint on its LAN."""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import requests

from tests.conftest import anvil_binary, missing_tool
from tests.integration.netns import Lab, LabError, Machine


def lab_of(names: list[str]) -> Lab:
    """A lab with one machine per name; without root (or iproute2) the test is skipped, under CI it fails."""
    lab = Lab()
    try:
        lab.up()
        for name in names:
            lab.add(name)
    except LabError as exc:
        lab.close()
        missing_tool(f"cannot make network namespaces (root, iproute2 and tc needed): {exc}", "VERITRAIN_REQUIRE_NETNS")
    return lab


def anvil_on(lab: Lab, port: int) -> tuple[str, subprocess.Popen]:
    """anvil listening on the bridge's address: (its RPC URL, its process), once it answers."""
    binary = anvil_binary()
    if binary is None:
        missing_tool("anvil not found: run `npm install @foundry-rs/anvil@1.7.1` (done by .ci/run)",
                     "VERITRAIN_REQUIRE_ANVIL")
    rpc = f"http://{lab.host_address}:{port}"
    proc = subprocess.Popen([binary, "--host", lab.host_address, "--port", str(port), "--silent"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            requests.post(rpc, json={"jsonrpc": "2.0", "id": 1, "method": "eth_chainId", "params": []}, timeout=1)
            return rpc, proc
        except requests.RequestException:
            time.sleep(0.2)
    pytest.fail(f"anvil did not start on {rpc}")


@dataclass
class Machines:
    """A test's machines: each one's folder under `tmp` (its working directory) and log, their node
    processes, their accounts, and the chain's RPC URL and process."""

    tmp: Path
    lab: Lab
    rpc: str = ""
    anvil: subprocess.Popen | None = None
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)
    accounts: dict[str, str] = field(default_factory=dict)

    def machine(self, name: str) -> Machine:
        return next(m for m in self.lab.machines if m.name == name)

    def home(self, name: str) -> Path:
        """The machine's own folder: its working directory."""
        return self.tmp / name

    def log(self, name: str) -> Path:
        return self.home(name) / f"{name}.log"
