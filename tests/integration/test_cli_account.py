"""keys → deploy --fund → register → stake → unbond → withdraw/claim, through the CLI on anvil."""

from __future__ import annotations

import json
import re
import stat

import pytest

from tests.conftest import run_cli

pytestmark = pytest.mark.anvil
ENV = {"VERITRAIN_PASSWORD": "correct horse"}


def test_account_lifecycle_on_anvil(anvil, tmp_path):
    keys = tmp_path / "keys"
    made = run_cli("keys", "new", "--out", str(keys), env=ENV)
    assert made.code == 0, made.stderr
    assert stat.S_IMODE((keys / "node_key").stat().st_mode) == 0o600
    address = run_cli("keys", "show", "--keys", str(keys)).stdout.strip()
    dep = tmp_path / "deployment.json"
    deployed = run_cli("deploy", "--rpc", anvil.url, "--dev-account", "--out", str(dep), "--fund", address,
                       "--fund-tokens", "500")
    assert deployed.code == 0, deployed.stderr
    common = ["--rpc", anvil.url, "--deployment", str(dep), "--keys", str(keys)]

    registered = run_cli("register", "miner", *common, "--multiaddr", "/ip4/127.0.0.1/tcp/4001", env=ENV)
    assert registered.code == 0, registered.stderr
    again = run_cli("register", "miner", *common, "--multiaddr", "/ip4/127.0.0.1/tcp/4001", env=ENV)
    assert again.code == 0 and "already registered as miner" in again.stdout, again.stderr  # nothing sent
    elsewhere = run_cli("register", "miner", *common, "--multiaddr", "/ip4/127.0.0.1/tcp/4002", env=ENV)
    assert elsewhere.code == 1 and "where no node proves the registered key" in elsewhere.stderr, elsewhere.stderr
    moved = run_cli("register", "miner", *common, "--multiaddr", "/ip4/127.0.0.1/tcp/4002", "--move", env=ENV)
    assert moved.code == 0, moved.stderr
    assert run_cli("stake", "150", *common, env=ENV).code == 0
    node = json.loads(run_cli("inspect", "node", address, "--rpc", anvil.url, "--deployment", str(dep), "--json").stdout)["data"]
    assert node["role"] == "miner" and node["staked"] == 150 * 10**18 and node["eligible"] is True
    assert node["token_balance"] == 350 * 10**18

    unbonded = run_cli("unbond", "50", *common, env=ENV)
    assert unbonded.code == 0, unbonded.stderr
    when = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \S+ \(in (40 min|39 min \d+ s)\)"  # the default 2400 s delay
    assert re.fullmatch(rf"unbonding 50 \(queued in all: 50\); withdrawable from {when}", unbonded.stdout.strip())
    early = run_cli("withdraw", *common, env=ENV)
    last = early.stderr.strip().splitlines()[-1]
    assert early.code == 1 and last.startswith("error: staking: still unbonding: 50 withdrawable from "), last
    assert re.search(rf"{when}$", last), last
    nothing = run_cli("claim", *common, env=ENV)
    assert nothing.code == 1 and nothing.stderr.strip().splitlines()[-1].lower() == f"error: nothing to claim for {address}".lower()
    wrong = run_cli("stake", "1", *common, env={"VERITRAIN_PASSWORD": "wrong"})
    assert wrong.code == 1 and "wrong password" in wrong.stderr and "Traceback" not in wrong.stderr
    node = json.loads(run_cli("inspect", "node", address, "--rpc", anvil.url, "--deployment", str(dep), "--json").stdout)["data"]
    assert node["staked"] == 100 * 10**18 and node["unbonding"] == 50 * 10**18
