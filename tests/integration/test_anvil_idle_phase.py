"""A phase that ends by time alone ends for the nodes on an idle anvil.

anvil mines on demand: while no one sends a transaction its latest block keeps its old
timestamp, and a view at "latest" keeps answering from that moment. When a validator dies
before committing scores, scoring ends only at its deadline; if the others then sat waiting
for the reveal phase at "latest", no one would send anything again and the round would never
end (seen in the churn soak). Nodes ask for the phase at the pending block instead."""

from __future__ import annotations

import time

import pytest
from eth_account import Account

from protocol.chain.backend import connect
from protocol.chain.client import ChainClient, Phase
from protocol.chain.deployment import load_deployment
from protocol.chain.scripted import join_network
from protocol.core.settlement.score_vector import score_commitment
from tests.conftest import run_cli

pytestmark = pytest.mark.anvil

SCORE_S = 3
RUN_TOML = f"""
run_name = "anvil-idle"
[chain]
commit_duration = 60
score_duration = {SCORE_S}
reveal_duration = 60
challenge_window = 60
"""


def test_scoring_ends_at_its_deadline_with_no_transaction_sent(anvil, tmp_path):
    (tmp_path / "run.toml").write_text(RUN_TOML)
    accounts = [Account.create() for _ in range(4)]
    dep_path = tmp_path / "deployment.json"
    result = run_cli("deploy", "--rpc", anvil.url, "--dev-account", "--config", str(tmp_path / "run.toml"),
                     "--out", str(dep_path), "--fund-tokens", "1000", *[x for a in accounts for x in ("--fund", a.address)])
    assert result.code == 0, result.stderr
    reader = ChainClient(connect(anvil.url), load_deployment(dep_path))
    net = join_network(reader.with_account(accounts[0]), 2, 2, lambda _m: None, funded=accounts)
    reader.with_account(accounts[0]).start()
    r = reader.current_round()
    for i, m in enumerate(net.miners):
        m.client.commit_update(r, bytes([i + 1]) * 32, bytes([i + 9]) * 32, 0)  # the last commit closes the phase
    net.validators[0].client.store_seed(r)
    net.validators[0].client.commit_scores(r, score_commitment(b"\x01" * 32, b"\x02" * 32))  # the other never does
    assert reader.phase(r, "pending") == Phase.SCORING

    deadline = reader.round_info(r)["score_deadline"]
    while reader.block_time("pending") < deadline:  # chain time, read without mining
        time.sleep(0.2)

    assert reader.phase(r) == Phase.SCORING  # "latest" is stuck where the last transaction left it
    assert reader.phase(r, "pending") == Phase.REVEAL  # what the next transaction will see, and nodes wait on
