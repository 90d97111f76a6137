"""What `inspect` tables show (issue 29): an ended round's phases at the times they closed, in
the order they ran and none in the future (the contract's deadlines stay later when phases
close early); tables piped to a file keep every address whole; amounts rounded unless
`--exact`, `--json` exact; a validator's reputation as none. Also `closed_times` on its own."""

from __future__ import annotations

import json
import re

import pytest

from protocol.chain.backend import connect, dev_account
from protocol.chain.client import ChainClient, Phase
from protocol.chain.deploy import deploy
from protocol.chain.round_timeline import closed_times
from protocol.chain.scripted import ScriptedNetwork, join_network, play_round
from protocol.cli.app import show
from protocol.config.run_config import RunConfig

TIME_ROW = re.compile(r"^\W*((?:commit|score|reveal|audit|result) (?:closed|deadline)|ended)\W+"
                      r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) \S+ \((.*?)\)", re.M)


@pytest.fixture(scope="module")
def ended() -> tuple[ChainClient, ScriptedNetwork]:
    """Round 0 played to its end with every phase closing early (everyone acted at once)."""
    handle = connect(None)
    chain = ChainClient(handle, deploy(handle, dev_account(handle), RunConfig()), dev_account(handle))
    net = join_network(chain, 2, 2, lambda _line: None)
    play_round(chain, net, lambda _line: None, cheat=False)
    return chain, net


def test_amounts_round_in_tables_and_stay_exact_with_exact_and_json(ended, capsys) -> None:
    chain, _ = ended
    show(chain, "summary", None, as_json=True)
    minted = json.loads(capsys.readouterr().out)["data"]["token"]["minted"]
    assert minted % 10**18 and round(minted / 10**18) == 1000  # integer division leaves 999.99…
    show(chain, "summary", None, as_json=False)
    assert re.search(r"minted \(emission\)\W+1,000\W", capsys.readouterr().out)
    show(chain, "summary", None, as_json=False, exact=True)
    exact = f"{minted // 10**18:,}." + f"{minted % 10**18:018d}".rstrip("0")
    assert re.search(rf"minted \(emission\)\W+{re.escape(exact)}\W", capsys.readouterr().out)


def test_an_ended_round_shows_when_its_phases_closed_in_order(ended, capsys) -> None:
    chain, _ = ended
    now = chain.block_time()
    show(chain, "round", "0", as_json=True)
    data = json.loads(capsys.readouterr().out)["data"]
    closed = [data["closed"][p] for p in ("commit", "score", "reveal", "audit", "result")]
    assert data["phase"] == "ended" and all(closed), closed
    assert closed == sorted(closed) and closed[-1] <= now, closed
    assert data["commit_deadline"] > data["score_deadline"]  # the chain's deadlines: out of order, as the bug read

    show(chain, "round", "0", as_json=False)
    rows = TIME_ROW.findall(capsys.readouterr().out)
    assert [label for label, _, _ in rows] == ["commit closed", "score closed", "reveal closed", "audit closed", "ended"]
    assert [stamp for _, stamp, _ in rows] == sorted(stamp for _, stamp, _ in rows)
    assert not [rel for _, _, rel in rows if rel.startswith("in ")], rows  # nothing of an ended round is to come


def test_an_open_round_shows_its_deadlines(ended, capsys) -> None:
    chain, _ = ended
    show(chain, "round", "1", as_json=False)
    rows = TIME_ROW.findall(capsys.readouterr().out)
    assert rows[0][0] == "commit deadline" and rows[0][2].startswith("in "), rows


def test_piped_tables_keep_addresses_whole(ended, capsys, monkeypatch) -> None:
    chain, net = ended
    monkeypatch.delenv("COLUMNS", raising=False)  # rich's width when piped: 80 unless COLUMNS says otherwise
    show(chain, "round", "0", as_json=False)
    out = capsys.readouterr().out
    for member in (*net.miners, *net.validators):
        assert member.address in out, f"{member.address} cut or wrapped:\n{out}"
    show(chain, "node", net.validators[0].address, as_json=False)
    out = capsys.readouterr().out
    assert f"node {net.validators[0].address}" in out and "miners only" in out  # a validator has no reputation


def test_closed_times_follow_early_closes_and_deadlines() -> None:
    deadlines = {"commit": 600, "score": 40, "reveal": 160, "audit": 280, "result": 700}
    everyone = closed_times(Phase.ENDED, deadlines, commit_closed=10, score_commits=2, reveals=[50, 55],
                            audits=[60, 58], ended=70)
    assert everyone == {"commit": 10, "score": 40, "reveal": 55, "audit": 60, "result": 70}
    one_silent = closed_times(Phase.ENDED, deadlines, commit_closed=10, score_commits=2, reveals=[50],
                              audits=[60], ended=300)
    assert one_silent == {"commit": 10, "score": 40, "reveal": 160, "audit": 160, "result": 300}
    assert closed_times(Phase.REVEAL, deadlines, 10, 2, [], [], 0) == \
        {"commit": 10, "score": 40, "reveal": None, "audit": None, "result": None}
