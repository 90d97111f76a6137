"""Machines for network tests: each node in its own Linux network namespace, on a bridge.

`Lab` makes a bridge in the root namespace holding the subnet's first address (where the
test's anvil listens, as a chain endpoint on the LAN), and one namespace per machine joined to
it by a veth pair, its link shaped by a token bucket (`tc ... tbf rate 100mbit`; this kernel
has no netem). Each namespace has its own port space, so every node listens on the same port,
as on separate machines. Needs root (CAP_NET_ADMIN) and `ip`/`tc`; `close()` removes every
namespace and link it made, and is safe to call after a partial setup.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass, field

RATE = "100mbit"  # each machine's link: a LAN, not loopback
SUBNET_PREFIX = "10.77"  # 10.77.N.0/24, N the first subnet no interface here holds yet


class LabError(Exception):
    """Raised when namespaces, links or the shaping cannot be set up (not root, no `ip`)."""


def _ip(*args: str) -> str:
    try:
        done = subprocess.run(args, capture_output=True, text=True, timeout=30)
    except FileNotFoundError as exc:
        raise LabError(f"{args[0]} not found") from exc
    if done.returncode != 0:
        raise LabError(f"`{' '.join(args)}` failed: {done.stderr.strip()}")
    return done.stdout


def _free_subnet() -> str:
    held = _ip("ip", "-o", "-4", "addr", "show")
    # from a place of this process's own: two labs set up at once (pytest-xdist workers) would
    # otherwise both find the first subnet free and share it
    start = os.getpid() % 250
    for n in ((start + k) % 250 for k in range(250)):
        if f" {SUBNET_PREFIX}.{n}." not in held:
            return f"{SUBNET_PREFIX}.{n}"
    raise LabError(f"no free {SUBNET_PREFIX}.N.0/24 subnet")


@dataclass
class Machine:
    name: str  # the test's name for it (m1, v1)
    netns: str  # the namespace's name
    address: str  # its IPv4 address on the bridge

    def command(self, args: list[str]) -> list[str]:
        """`args` run inside this machine's namespace."""
        return ["ip", "netns", "exec", self.netns, *args]


@dataclass
class Lab:
    tag: str = field(default_factory=lambda: f"vt{os.getpid() % 100000}")  # link names: at most 15 chars
    subnet: str = ""
    machines: list[Machine] = field(default_factory=list)
    _links: list[str] = field(default_factory=list)  # host ends of veth pairs (gone with their namespace)
    _bridge_made: bool = False

    @property
    def bridge(self) -> str:
        return f"{self.tag}br"

    @property
    def host_address(self) -> str:
        """The bridge's address in the root namespace: the chain endpoint's host."""
        return f"{self.subnet}.1"

    def up(self) -> None:
        if shutil.which("ip") is None or shutil.which("tc") is None:
            raise LabError("`ip` and `tc` (iproute2) are needed")
        self.subnet = _free_subnet()
        _ip("ip", "link", "add", self.bridge, "type", "bridge")
        self._bridge_made = True
        _ip("ip", "addr", "add", f"{self.host_address}/24", "dev", self.bridge)
        _ip("ip", "link", "set", self.bridge, "up")

    def add(self, name: str) -> Machine:
        index = len(self.machines) + 2
        machine = Machine(name, f"{self.tag}-{name}", f"{self.subnet}.{index}")
        host_end, node_end = f"{self.tag}h{index}", f"{self.tag}n{index}"
        _ip("ip", "netns", "add", machine.netns)
        self.machines.append(machine)  # from here on, close() removes it
        _ip("ip", "link", "add", host_end, "type", "veth", "peer", "name", node_end)
        self._links.append(host_end)
        _ip("ip", "link", "set", node_end, "netns", machine.netns)
        _ip("ip", "link", "set", host_end, "master", self.bridge)
        _ip("ip", "link", "set", host_end, "up")
        ns = ("ip", "-n", machine.netns)
        _ip(*ns, "addr", "add", f"{machine.address}/24", "dev", node_end)
        _ip(*ns, "link", "set", node_end, "up")
        _ip(*ns, "link", "set", "lo", "up")
        _ip("tc", "-n", machine.netns, "qdisc", "add", "dev", node_end, "root", "tbf", "rate", RATE,
            "burst", "32kbit", "latency", "50ms")
        return machine

    def close(self) -> list[str]:
        """Remove every namespace (its veth pair goes with it) and the bridge; the errors, if any."""
        errors = []
        for machine in self.machines:
            try:
                _ip("ip", "netns", "del", machine.netns)
            except LabError as exc:
                errors.append(str(exc))
        self.machines = []
        for link in self._links:  # normally gone with its namespace; not when a setup step failed
            if subprocess.run(["ip", "link", "show", link], capture_output=True).returncode == 0:
                try:
                    _ip("ip", "link", "del", link)
                except LabError as exc:
                    # the kernel removes a namespace's veth peer asynchronously: gone meanwhile is gone
                    if "Cannot find device" not in str(exc):
                        errors.append(str(exc))
        self._links = []
        if self._bridge_made:
            try:
                _ip("ip", "link", "del", self.bridge)
            except LabError as exc:
                errors.append(str(exc))
            self._bridge_made = False
        return errors
