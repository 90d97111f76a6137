"""`veritrain devnet --stages 2 --pipelines 2 --cheaters stage-lazy --lazy-validators 1` (PROTOCOL.md
§16): four stage miners in two pipelines (one seat held by a lazy stage that nudges its parameters
after step 2) and four validators, one of which never replays, two rounds on the embedded chain.
Every round ends with one attested model; the lazy stage is caught replaying its own segments,
reported and slashed, and its pipeline's update dropped (its honest stage-mate scores 0 for that
round and is never slashed); the lazy validator's made-up stage witnesses fail their audits and it
is slashed; every other honest stage miner is verified and paid in every round it trained, fetches
only its own stage of the next model (PROTOCOL.md §16.2), and prunes its served segments once a
round is final."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_cli

pytestmark = pytest.mark.slow


def test_a_staged_devnet_catches_a_lazy_stage_and_a_lazy_validator_and_pays_the_honest_pipeline(tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = run_cli("devnet", "--stages", "2", "--pipelines", "2", "--validators", "4", "--lazy-validators", "1",
                     "--committee", "0", "--cheaters", "stage-lazy",
                     "--rounds", "2", "--preset", "micro", "--inner-steps", "6", "--checkpoint-every", "3",
                     "--commit-window", "60", "--out", str(out), "--timeout", "500", timeout=700)
    assert result.code == 0, (result.stdout[-2000:], result.stderr[-3000:])
    report = json.loads((out / "report.json").read_text())
    rounds, final = report["rounds"], report["final"]
    assert len(rounds) == 2 and all(not r["fallback"] and len(r["model_hash"]) == 66 for r in rounds)
    assert len({r["model_hash"] for r in rounds}) == 2  # the model moved each round
    lazy = next(n for n in final if n["kind"] == "stage-lazy")
    lazy_validator = next(n for n in final if n["kind"] == "lazy-validator")
    assert lazy["slashed"] > 0 and lazy_validator["slashed"] > 0
    assert all(n["slashed"] == 0 for n in final if n["kind"] == "honest")  # no honest node is slashed
    confirmed = {(r["accused"], r["kind"]) for r in report["reports"] if r["status"] == "confirmed"}
    assert confirmed == {(lazy["address"], "replay"), (lazy_validator["address"], "lazy_validator")}, confirmed
    # nobody else is accused
    assert {r["accused"] for r in report["reports"]} == {lazy["address"], lazy_validator["address"]}
    log = (out / "devnet.log").read_text()
    assert '"event": "pruned stage segments", "round": 0' in log
    # round 1's stage miners fetch their stage of θ_1 alone, by the stage index the model hash names
    assert log.count('"event": "stage of the model fetched alone", "round": 1') >= 2, log[-3000:]
    assert '"event": "no peer serves the round\'s stage, making the whole model", "round": 1' not in log
    for r in rounds:
        miners = {m["address"]: m for m in r["miners"]}
        cheat = miners[lazy["address"]]
        honest = [m for m in r["miners"] if m["kind"] == "honest" and m["committed"]]
        assert all(m["verified"] for m in honest), honest
        if cheat["committed"]:  # caught in the round it cheated, its pipeline's update dropped
            assert cheat["verified"] is False and cheat["reward"] == 0
            unpaid = [m for m in honest if m["reward"] == 0]
            assert len(unpaid) == 1 and unpaid[0]["stage"] != cheat["stage"], unpaid  # its stage-mate alone
        assert sum(m["reward"] > 0 for m in honest) >= 2  # the honest pipeline: both of its stages paid
