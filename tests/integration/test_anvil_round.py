"""A full settlement round on a real anvil node, deployed and inspected through the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from eth_account import Account

from protocol.chain.backend import connect
from protocol.chain.client import ChainClient
from protocol.chain.deployment import load_deployment
from protocol.chain.scripted import claim_all, join_network, play_round
from protocol.chain.settlement_history import SettlementHistory
from protocol.config.run_config import TOKEN_UNIT
from tests.conftest import run_cli

pytestmark = pytest.mark.anvil

RUN_TOML = """
run_name = "anvil-it"
[chain]
commit_duration = 120
score_duration = 120
reveal_duration = 120
challenge_window = 120
unbonding_delay = 1500
emission_per_round = 1000
miner_share_bps = 7000
slash_bps = 5000
reporter_share_bps = 2000
report_bond = 10
"""
FUND_TOKENS = 1000


def inspect_json(anvil_url: str, dep_path, *view: str) -> dict:
    result = run_cli("inspect", *view, "--rpc", anvil_url, "--deployment", str(dep_path), "--json")
    assert result.code == 0, result.stderr
    return json.loads(result.stdout)["data"]


def deploy_funded(anvil_url: str, tmp_path: Path, toml: str, accounts: list) -> Path:
    """`veritrain deploy` of `toml` on anvil, funding `accounts`; the deployment file's path."""
    (tmp_path / "run.toml").write_text(toml)
    dep_path = tmp_path / "deployment.json"
    fund_args = [arg for a in accounts for arg in ("--fund", a.address)]
    result = run_cli("deploy", "--rpc", anvil_url, "--dev-account", "--config", str(tmp_path / "run.toml"),
                     "--out", str(dep_path), "--fund-tokens", str(FUND_TOKENS), *fund_args)
    assert result.code == 0, result.stderr
    return dep_path


def test_full_round_on_anvil(anvil, tmp_path):
    accounts = [Account.create() for _ in range(5)]
    dep_path = deploy_funded(anvil.url, tmp_path, RUN_TOML, accounts)
    deployment = load_deployment(dep_path)
    handle = connect(anvil.url)
    reader = ChainClient(handle, deployment)
    reader.check_deployment()
    supply_after_deploy = reader.call("token", "totalSupply")

    net = join_network(reader.with_account(accounts[0]), 3, 2, lambda _m: None, funded=accounts)
    play_round(reader.with_account(accounts[0]), net, lambda _m: None)
    claim_all(net)

    summary = inspect_json(anvil.url, dep_path, "summary")
    detail = inspect_json(anvil.url, dep_path, "round", "0")
    disputes = inspect_json(anvil.url, dep_path, "disputes")
    cfg = deployment.run_config.chain

    # the report was confirmed and slashed the cheater by slash_bps
    assert [d["status"] for d in disputes] == ["confirmed"]
    cheater = disputes[0]["miner"]
    cheater_node = inspect_json(anvil.url, dep_path, "node", cheater)
    stake_before = cheater_node["staked"] + cheater_node["slashed"]
    assert stake_before in {(cfg.min_miner_stake + 50 * i) * TOKEN_UNIT for i in (1, 2, 3)}
    assert cheater_node["slashed"] == stake_before * cfg.slash_bps // 10_000
    assert cheater_node["staked"] == stake_before - cheater_node["slashed"]
    assert cheater_node["claimed"] == 0

    # miners are paid their consensus share of the miner pool, and claimed it all
    pool = cfg.emission_per_round * TOKEN_UNIT * cfg.miner_share_bps // 10_000
    total_consensus = sum(m["consensus"] for m in detail["miners"])
    for m in detail["miners"]:
        node = inspect_json(anvil.url, dep_path, "node", m["address"])
        assert node["claimed"] == pool * m["consensus"] // total_consensus
        assert node["claimable"] == 0

    # the reporter received its share of the slash on top of its own tokens
    reporter = disputes[0]["reporter"]
    reporter_node = inspect_json(anvil.url, dep_path, "node", reporter)
    reward_share = cheater_node["slashed"] * cfg.reporter_share_bps // 10_000
    assert reporter_node["token_balance"] == (FUND_TOKENS * TOKEN_UNIT - reporter_node["staked"]
                                              + reward_share + reporter_node["claimed"])

    # supply: genesis + emission - burned part of the slash
    burned = cheater_node["slashed"] - reward_share
    assert summary["token"]["total_supply"] == supply_after_deploy + summary["token"]["minted"] - burned
    assert summary["totals"]["unclaimed"] == 0  # everyone claimed its whole cumulative earnings
    assert summary["current_round"] == 1
    assert detail["result"]["final_root"] is not None and detail["result"]["roots"][0]["status"] == "final"


def test_a_round_with_check_committees_settles_on_anvil_and_a_right_column_stands(anvil, tmp_path):
    """With `committee = 3` the chain draws each column's committee from the round's seed when a
    column is challenged (ColumnChallenges, committee_draw.vy): the result computed from chain data
    by committees is posted, a challenge of its first column is not upheld (the challenger's bond
    burns) and the round is final, paying each miner its committee's consensus."""
    toml = RUN_TOML.replace("[chain]\n", "[chain]\ncommittee = 3\n") + "[training.compute]\nsegments_per_validator = 2\n"
    accounts = [Account.create() for _ in range(7)]
    dep_path = deploy_funded(anvil.url, tmp_path, toml, accounts)
    reader = ChainClient(connect(anvil.url), load_deployment(dep_path))
    assert reader.read.column_challenges.committee_size() == 3
    net = join_network(reader.with_account(accounts[0]), 3, 4, lambda _m: None, funded=accounts)
    r = play_round(reader.with_account(accounts[0]), net, lambda _m: None, cheat=False, challenge_column=0)
    assert len(net.gas["challenge_column"]) == 1 and reader.call("results", "rejected_count", r) == 0
    settled = SettlementHistory(reader).final(r)
    assert settled is not None and settled.inputs.committee_size == 3
    weights = settled.inputs.column_weights(0)
    assert weights.total == 3 and sum(weights.weights) == 3  # the first column: three seats, all revealed
    detail = inspect_json(anvil.url, dep_path, "round", str(r))
    assert [m["consensus"] for m in detail["miners"]] == list(settled.result.consensus)
    assert detail["result"]["roots"][0]["status"] == "final"  # the right column's challenge was not upheld
