"""Check committees and score audits in a whole network (`veritrain devnet --miners 12
--validators 6 --committee 3 --cheaters lazy --lying-validators 1`): each miner's column is
decided by a committee of three seats drawn from the round's seed; a validator checks only the
miners where it holds one of the six drawn seats (committee and backups), not all thirteen; the
lazy miner is reported and slashed; the lying validator, which checks honestly but reveals half
of its passed miners' scores one unit off and zeroes the other half without a report, is caught
by score audits (a revealed score is recomputed bit for bit, an unreported zero checked and
recomputed) and slashed in the first round; the honest miners and validators are paid and nobody
honest is reported, though honest validators zero the lazy miner (with their reports)."""

from __future__ import annotations

import json
from collections import Counter, defaultdict

import pytest

from protocol.devnet.report import node_names
from tests.conftest import run_cli
from tests.integration.json_log import node_of, records

pytestmark = pytest.mark.slow

MINERS, VALIDATORS, SEATS = 12, 6, 3

# A liveness bound, not a speed bound: the phase closes as soon as every miner has committed
# (about 30 s after the round opens on 2 quiet cores). Beside another test worker, round 1's
# miners, each first making θ_1 from twelve updates, needed more than 60 s (December 2026).
COMMIT_WINDOW_S = 180


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("devnet-committees")
    result = run_cli("devnet", "--miners", str(MINERS), "--validators", str(VALIDATORS), "--committee", str(SEATS),
                     "--cheaters", "lazy", "--lying-validators", "1", "--rounds", "2", "--preset", "micro",
                     "--commit-window", str(COMMIT_WINDOW_S), "--out", str(out), "--timeout", "1200", timeout=1500)
    assert result.code == 0, (result.stdout[-2000:], result.stderr[-3000:])
    return json.loads((out / "report.json").read_text()), records(out / "devnet.log")


def test_every_column_is_decided_by_a_full_committee_whose_members_checked_it(run):
    data, log = run
    checked = defaultdict(set)  # (round, miner) -> validator addresses that replayed it
    names = {f["address"]: f for f in data["final"]}
    address_of = dict(zip(node_names(data["final"]), (f["address"] for f in data["final"]), strict=True))
    for e in log:
        if e["event"] == "checked" and e.get("mode") == "exact":
            checked[(e["round"], e["miner"])].add(address_of[node_of(e)])
    honest = {f["address"] for f in data["final"] if f["role"] == "validator" and f["kind"] == "honest"}
    for r in data["rounds"]:
        assert r["fallback"] is False
        for m in r["miners"]:
            assert m["committed"], m
            seats, drawn = m["committee"], m["drawn"]
            assert len(drawn) == 2 * SEATS and set(seats) <= set(names), m
            # the committee is the first three drawn seats whose validator counted; every honest one
            # counts, so only seats drawn for the caught liar pass to backups (with 6 drawn seats, the
            # liar holds 4 of one miner's with about 1 % odds: then the committee is two, a quorum)
            counted = [v for v in drawn if v in honest or v in seats]
            assert Counter(counted[:SEATS]) == Counter(seats), m
            assert set(seats) <= checked[(r["round"], m["address"])], (m, checked[(r["round"], m["address"])])
            if len(counted) < 2:
                # the liar held 5 or 6 of the 6 drawn seats (about 0.07 % a column, 2 % a run): one
                # seat of three is no quorum, so the column decides nothing and pays nothing
                assert m["score"] == 0 and m["reward"] == 0, m
                continue
            assert sum(seats.values()) >= 2, m  # 2/3 of the seats: the column is decided


def test_a_validator_checks_only_the_miners_it_holds_a_seat_of(run):
    _, log = run
    lines = [e for e in log if e["event"] == "verifying"]
    assert len(lines) >= 2 * (VALIDATORS - 1)  # every validator, every round (the liar loses its permit)
    n = MINERS + 1
    for e in lines:
        assert e["exact"] + e["off-committee"] == e["miners"] == n, e
        assert e["exact"] > 0, e  # no seat of any of 13 miners: 0.335^13, about 6e-7
    # a validator holds a seat of a miner with 1 - (5/6)^6 = 0.665: all 13 with 0.005, so some line
    # is short; the mean of about 11 lines is 8.6 ± 0.5
    assert any(e["exact"] < n for e in lines), lines
    mean = sum(e["exact"] for e in lines) / len(lines)
    assert 6 <= mean <= 11, mean


def test_the_lazy_miner_and_the_lying_validator_are_slashed_and_everyone_honest_is_paid(run):
    data, _ = run
    final = {f["kind"]: f for f in data["final"] if f["kind"] != "honest"}
    assert final["lazy"]["slashed"] > 0 and final["lazy"]["claimed"] == 0
    assert final["lying-validator"]["slashed"] > 0 and final["lying-validator"]["claimed"] == 0
    honest = [f for f in data["final"] if f["kind"] == "honest"]
    assert len(honest) == MINERS + VALIDATORS - 1
    assert all(f["claimed"] > 0 and f["slashed"] == 0 for f in honest), honest


def test_score_audits_catch_the_liar_in_the_first_round_and_accuse_nobody_honest(run):
    data, _ = run
    liar = next(f["address"] for f in data["final"] if f["kind"] == "lying-validator")
    lazy = next(f["address"] for f in data["final"] if f["kind"] == "lazy")
    wrong = [rep for rep in data["reports"] if rep["kind"] == "wrong_score"]
    assert any(rep["round"] == 0 and rep["status"] == "confirmed" for rep in wrong), data["reports"]
    brief = [(rep["round"], rep["kind"], rep["accused"][:8], rep["reporter"][:8], rep["status"]) for rep in data["reports"]]
    guilty = [rep for rep in data["reports"] if rep["accused"] in {liar, lazy}]
    assert all(rep["status"] != "rejected" for rep in guilty), brief
    # 19 nodes on a loaded CI host can leave an honest miner too slow to serve one check: the only
    # report an honest node may draw is `unavailable`, and the voters, served, never confirm it
    vindicated = [rep for rep in data["reports"] if rep not in guilty]
    assert all(rep["kind"] == "unavailable" and rep["status"] != "confirmed" for rep in vindicated), brief


def test_an_unreported_zero_is_found_wrong_and_a_reported_one_is_not(run):
    """Deflation: the liar's zeros of honest miners are found wrong in the first round (by an
    honest seat-holder's cross-check or a drawn auditor); the honest zeros of the lazy miner, each
    backed by its validator's report, are never."""
    data, log = run
    liar = next(f["address"] for f in data["final"] if f["kind"] == "lying-validator")
    lazy = next(f["address"] for f in data["final"] if f["kind"] == "lazy")
    failed = [e for e in log if e["event"] == "audited" and e["verdict"] == "failed"]
    zeros = [e for e in failed if e["detail"].startswith(("revealed score 0,", "revealed 0 with no report"))]
    assert any(e["round"] == 0 and e["validator"] == liar and e["miner"] != lazy for e in zeros), failed
    assert all(e["validator"] == liar for e in failed), failed
