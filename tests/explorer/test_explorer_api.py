"""The explorer's JSON API and server: the figures of `veritrain inspect --json`, 404s for what
does not exist, 502 when the RPC node dies (and the server keeps serving), 504 when it hangs,
and the CLI command serving until Ctrl-C."""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from web3 import Web3

from protocol.chain.backend import ChainHandle, connect, dev_account, lean
from protocol.chain.client import ChainClient
from protocol.chain.deploy import deploy
from protocol.chain.deployment import save_deployment
from protocol.chain.scripted import ScriptedNetwork, claim_all, join_network, play_round
from protocol.cli.app import show
from protocol.config.run_config import RunConfig
from protocol.explorer.api import ExplorerApi
from protocol.explorer.server import STATIC, Explorer
from tests.conftest import REPO, start_anvil, stop_process


def fetch(url: str) -> tuple[int, dict[str, str], bytes]:
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


def api(base: str, path: str) -> tuple[int, Any]:
    status, _, body = fetch(base + path)
    return status, json.loads(body)


@pytest.fixture(scope="module")
def settled() -> tuple[ChainClient, ScriptedNetwork]:
    """An embedded chain after two settled rounds (the first with a confirmed fraud report and
    a slash) and everyone's claims; round 2 is open."""
    handle = connect(None)
    deployer = ChainClient(handle, deploy(handle, dev_account(handle), RunConfig()), dev_account(handle))
    net = join_network(deployer, 3, 2, lambda _line: None)
    play_round(deployer, net, lambda _line: None)
    play_round(deployer, net, lambda _line: None, cheat=False)
    claim_all(net)
    return ChainClient(handle, deployer.deployment), net  # read-only, as the explorer runs


@pytest.fixture(scope="module")
def site(settled) -> Iterator[str]:
    client, _ = settled
    with Explorer(ExplorerApi(client, "embedded")) as explorer:
        yield explorer.url


def inspect_json(client: ChainClient, capsys, view: str, target: str | None = None) -> Any:
    """What `veritrain inspect VIEW [TARGET] --json` prints under "data" (its own code path)."""
    capsys.readouterr()
    show(client, view, target, as_json=True)
    printed = json.loads(capsys.readouterr().out)
    assert printed["view"] == view
    return printed["data"]


def test_every_view_answers_what_inspect_prints(settled, site, capsys):
    client, net = settled
    block = int(client.w3.eth.block_number)
    for view, target in [("summary", None), ("rounds", None), ("disputes", None),
                         *[("round", str(r)) for r in range(client.current_round() + 1)],
                         ("node", net.miners[-1].address)]:  # every node: the next test
        status, body = api(site, f"api/{view}" + (f"/{target}" if target else ""))
        assert status == 200, body
        assert body["view"] == view and body["block"] == block
        assert body["data"] == inspect_json(client, capsys, view, target), (view, target)
    rounds = api(site, "api/rounds")[1]["data"]
    assert [r["heldout_loss"] is not None for r in rounds] == [True, True, False]  # two final rounds, one open


def test_nodes_lists_inspect_node_of_every_registered_account(settled, site, capsys):
    client, net = settled
    status, body = api(site, "api/nodes")
    assert status == 200
    members = [p.address for p in (*net.miners, *net.validators)]
    assert [n["address"] for n in body["data"]] == members  # registration order
    assert body["data"] == [inspect_json(client, capsys, "node", a) for a in members]
    assert sum(n["slashed"] > 0 for n in body["data"]) == 1  # the scripted cheater of round 0


def test_votes_are_the_fraud_voted_events(settled, site):
    _, net = settled
    disputes = api(site, "api/disputes")[1]["data"]
    votes = api(site, "api/votes")[1]["data"]
    assert [d["status"] for d in disputes] == ["confirmed"]
    # the first validator reported (a confirming vote of its own); every other validator confirmed
    assert [(v["report_id"], v["validator"], v["vote"]) for v in votes] == \
        [(disputes[0]["id"], p.address, "confirm") for p in net.validators]
    assert disputes[0]["votes"] == len(votes)
    assert all(v["weight"] > 0 for v in votes)


@pytest.mark.parametrize("path, message", [
    ("api/round/99", "round 99 does not exist (current round: 2)"),
    ("api/round/one", "round must be a number, got 'one'"),
    ("api/node/0x1234", "not an address: '0x1234'"),
    ("api/rounds/3", "no such page: /api/rounds/3"),
    ("api/nothing", "no such page: /api/nothing"),
    ("api", "no such page: /api"),
    ("elsewhere", "no such page: /elsewhere"),
    ("static/missing.js", "no such page: /static/missing.js"),
    ("static/..%2Fapi.py", "no such page: /static/..%2Fapi.py"),
])
def test_what_does_not_exist_is_a_404_with_a_json_message(site, path, message):
    status, body = api(site, path)
    assert (status, body) == (404, {"error": message, "status": 404})


def test_the_page_is_served_whole_from_this_server(site):
    status, headers, page = fetch(site)
    assert status == 200 and headers["Content-Type"].startswith("text/html")
    assert "default-src 'self'" in headers["Content-Security-Policy"]
    scripts = re.findall(r'<script src="/static/([\w.]+)"', page.decode())
    assert scripts == ["format.js", "dom.js", "chart.js", "tables.js", "explorer.js"]
    for name in [*scripts, "explorer.css"]:
        status, headers, _ = fetch(f"{site}static/{name}")
        assert status == 200 and headers["Content-Type"].split(";")[0] in ("text/javascript", "text/css")
    for file in STATIC.iterdir():  # nothing from a CDN or any other host
        urls = set(re.findall(r"https?://[^\s\"'`)]+", file.read_text())) - {"http://www.w3.org/2000/svg"}
        assert not urls, (file.name, urls)


def test_answers_follow_the_blocks(settled, site):
    client, net = settled
    first = fetch(site + "api/rounds")[2]
    assert fetch(site + "api/rounds")[2] == first  # no new block: the cached answer
    r = client.current_round()
    net.miners[0].client.commit_update(r, b"\x01" * 32, b"\x02" * 32)
    status, body = api(site, "api/rounds")
    assert status == 200 and body["block"] == json.loads(first)["block"] + 1
    assert body["data"][r]["commits"] == 1
    head = api(site, "api/head")[1]
    assert head["block"] == body["block"] and head["chain_id"] == client.deployment.chain_id


def test_a_chain_that_never_answers_is_a_504(settled):
    """A node that accepts the connection and never replies: the request gives up, with a message."""
    _, net = settled
    with socket.socket() as stalled:
        stalled.bind(("127.0.0.1", 0))
        stalled.listen(8)  # connections wait in the backlog, never answered
        url = f"http://127.0.0.1:{stalled.getsockname()[1]}"
        w3 = lean(Web3(Web3.HTTPProvider(url, request_kwargs={"timeout": 3})))
        client = ChainClient(ChainHandle(w3=w3, embedded=False), net.miners[0].client.deployment)
        service = ExplorerApi(client, url, timeout_s=0.3)
        reply = service.get("/api/summary")
        service.close()
    assert reply.status == 504
    assert json.loads(reply.body)["error"] == f"the chain at {url} did not answer within 0.3 s"


@pytest.fixture
def own_anvil():
    node = start_anvil()
    yield node
    node.stop()


@pytest.mark.anvil
def test_a_dead_rpc_node_is_a_502_and_the_server_keeps_serving(own_anvil):
    handle = connect(own_anvil.url)
    client = ChainClient(handle, deploy(handle, dev_account(handle), RunConfig()))
    with Explorer(ExplorerApi(client, own_anvil.url)) as explorer:
        assert api(explorer.url, "api/summary")[0] == 200
        own_anvil.stop()
        for path in ("api/summary", "api/head", "api/round/0"):
            status, body = api(explorer.url, path)
            assert status == 502
            assert body["error"] == (f"reading the chain at {own_anvil.url} failed: "
                                     "ConnectionError: [Errno 111] Connection refused")
        assert fetch(explorer.url)[0] == 200  # the page still loads (and shows the error)
        assert api(explorer.url, "api/nothing")[0] == 404


@pytest.mark.anvil
def test_the_cli_serves_until_ctrl_c(own_anvil, tmp_path: Path):
    handle = connect(own_anvil.url)
    dep_path = tmp_path / "deployment.json"
    save_deployment(deploy(handle, dev_account(handle), RunConfig()), dep_path)
    # started ignoring SIGINT, as a shell script's background job is: Ctrl-C must stop it all the same
    ignored = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        proc = subprocess.Popen([sys.executable, "-m", "protocol.cli.app", "explorer", "--rpc", own_anvil.url,
                                 "--deployment", str(dep_path), "--port", "0"], cwd=REPO, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    finally:
        signal.signal(signal.SIGINT, ignored)
    try:
        line = proc.stdout.readline()  # type: ignore[union-attr]
        found = re.search(r"at (http://127\.0\.0\.1:\d+/) \(Ctrl-C stops\)", line)
        assert found, line + proc.stderr.read()  # type: ignore[union-attr]
        assert api(found.group(1), "api/head")[1]["chain_id"] == handle.chain_id
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            stop_process(proc)
    assert proc.returncode == 0
    assert err.strip() == "explorer stopped"


def test_the_cli_refuses_a_missing_deployment_in_one_line(tmp_path: Path):
    from typer.testing import CliRunner

    from protocol.cli.app import app

    result = CliRunner().invoke(app, ["explorer", "--deployment", str(tmp_path / "nope.json"), "--port", "0"])
    assert result.exit_code == 1
    assert result.output.count("\n") == 1 and result.output.startswith("error:"), result.output


def test_a_taken_port_is_one_config_error(settled):
    from protocol.core.errors import ConfigError

    client, _ = settled
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        with pytest.raises(ConfigError, match=f"cannot listen on 127.0.0.1:{port}: Address already in use"):
            Explorer(ExplorerApi(client, "embedded"), "127.0.0.1", port)
