"""docs/OPERATORS.md §10.4, run: each of the ten errors in its table is caused through the real
CLI on anvil, and its line holds the text the table's first column gives. The table and the
cases here must name the same errors."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import multiaddr
import pytest
import trio

from protocol.chain.client import Role
from protocol.chain.registration import register_node
from protocol.node.data_dir_lock import DataDirLock
from protocol.node.keys import load_keys, new_keys
from protocol.p2p.host import build_host
from tests.conftest import REPO, free_port
from tests.integration.netutil import PASSWORD, deploy_with_keys, micro_run_toml, reader

pytestmark = pytest.mark.anvil
SECTION = re.compile(r"^### 10\.4 Troubleshooting.*?\n(.*?)(?=^#)", re.M | re.S)
ROW = re.compile(r"^\| `([^`]+)` \|", re.M)


def documented() -> list[str]:
    text = (REPO / "docs" / "OPERATORS.md").read_text() + "\n#"
    section = SECTION.search(text)
    assert section, "docs/OPERATORS.md has no §10.4 Troubleshooting"
    return ROW.findall(section.group(1))


@pytest.fixture(scope="module")
def net(anvil, tmp_path_factory) -> dict[str, object]:
    tmp = tmp_path_factory.mktemp("trouble")
    dep, keys, accounts = deploy_with_keys(anvil.url, tmp, 3, micro_run_toml("trouble", 60))
    unfunded = tmp / "unfunded"
    new_keys(unfunded, PASSWORD, kdf_iterations=2)
    return {"url": anvil.url, "dep": dep, "keys": keys, "accounts": accounts, "unfunded": unfunded, "tmp": tmp}


def miner(net: dict, keys: Path, data: Path, *extra: str, rpc: str | None = None, dep: Path | None = None,
          password: str | None = PASSWORD) -> str:
    """`veritrain miner ...`'s stderr (it must fail); VERITRAIN_PASSWORD unset when `password` is None."""
    env = {k: v for k, v in os.environ.items() if k != "VERITRAIN_PASSWORD"}
    if password is not None:
        env["VERITRAIN_PASSWORD"] = password
    args = ["miner", "--rpc", rpc or net["url"], "--deployment", str(dep or net["dep"]), "--keys", str(keys),
            "--data-dir", str(data), "--log-format", "text", *extra]
    proc = subprocess.run([sys.executable, "-m", "protocol.cli.app", *args], capture_output=True, text=True, env=env,
                          cwd=REPO, stdin=subprocess.DEVNULL, timeout=120)
    assert proc.returncode in (1, 2), proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return errors[0]


def other_chain(net: dict, tmp: Path) -> Path:
    data = json.loads(Path(net["dep"]).read_text())
    data["chain_id"] += 1
    path = tmp / "other-chain.json"
    path.write_text(json.dumps(data))
    return path


def dead_url() -> str:
    return f"http://127.0.0.1:{free_port()}"


def data_dir_in_use(net: dict, tmp: Path) -> str:
    with DataDirLock(tmp / "held"):
        return miner(net, net["keys"][0], tmp / "held")


def registered_at(net: dict, index: int, addr: str) -> None:
    client = reader(net["url"], net["dep"])
    keys = load_keys(net["keys"][index], PASSWORD)
    register_node(client.with_account(keys.account), Role.MINER, keys.identity, addr)


def stale_registration(net: dict, tmp: Path) -> str:
    registered_at(net, 1, f"/ip4/127.0.0.1/tcp/{free_port()}")  # a node that is gone
    return miner(net, net["keys"][1], tmp / "fresh")


@pytest.fixture
def live_node(net: dict) -> Iterator[str]:
    """A node holding keys[2]'s node key, listening at the address its account is registered at."""
    identity = load_keys(net["keys"][2], PASSWORD).identity
    addr, up, done = f"/ip4/127.0.0.1/tcp/{free_port()}", threading.Event(), threading.Event()

    async def serve() -> None:
        async with build_host(identity, admit=lambda _peer: False).run([multiaddr.Multiaddr(addr)]):
            up.set()
            await trio.to_thread.run_sync(done.wait)

    thread = threading.Thread(target=trio.run, args=(serve,), daemon=True)
    thread.start()
    assert up.wait(30), "the live node did not start listening"
    registered_at(net, 2, addr)
    yield addr
    done.set()
    thread.join(30)


def cases(net: dict, tmp: Path, twin: str) -> dict[str, Callable[[], str]]:
    keys, data = net["keys"][0], tmp / "data"
    return {
        "set VERITRAIN_PASSWORD": lambda: miner(net, keys, data, password=None),
        "wrong password or corrupt keystore": lambda: miner(net, keys, data, password="not it"),
        "needs its scheme": lambda: miner(net, keys, data, rpc=net["url"].removeprefix("http://")),
        "cannot reach RPC node": lambda: miner(net, keys, data, rpc=dead_url()),
        "chain id mismatch": lambda: miner(net, keys, data, dep=other_chain(net, tmp)),
        "has no gas money": lambda: miner(net, net["unfunded"], data),
        "more tokens, and account": lambda: miner(net, keys, data, "--stake", "5000"),
        "is in use by another node": lambda: data_dir_in_use(net, tmp),
        "already served by a live node": lambda: miner(net, net["keys"][2], tmp / "twin"),
        "where no node proves the registered key": lambda: stale_registration(net, tmp),
    }


def test_every_error_in_the_troubleshooting_table_reads_as_documented(net, live_node, tmp_path: Path) -> None:
    table = documented()
    assert len(table) == 10, table
    triggers = cases(net, tmp_path, live_node)
    assert sorted(table) == sorted(triggers), "§10.4's table and this test name different errors"
    for text in table:
        line = triggers[text]()
        assert text in line, (text, line)
