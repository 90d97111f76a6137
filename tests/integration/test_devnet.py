"""`veritrain devnet` end to end: real chain (embedded), real libp2p hosts, real training
in worker processes; four validators, one of which never replays (three honest ones remain
when it is slashed out, so one validator refused a checkpoint never zeroes a miner), and three
extra miners: a lazy one that fakes every segment, one that also withholds each faked
checkpoint from the validator that asks first (its challenger) while serving the voters, and
an honest one that is slow once a round (it refuses its first checkpoint request)."""

from __future__ import annotations

import json

import pytest

from tests.conftest import run_cli
from tests.integration.json_log import node_of, records

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def devnet_report(tmp_path_factory):
    out = tmp_path_factory.mktemp("devnet")
    result = run_cli("devnet", "--miners", "2", "--validators", "4", "--lazy-validators", "1", "--rounds", "2",
                     "--preset", "micro", "--cheaters", "lazy,withhold-challenger,serve-late", "--out", str(out),
                     "--timeout", "1200", timeout=1500)
    assert result.code == 0, (result.stdout[-2000:], result.stderr[-3000:])
    assert "settlement" in result.stdout
    return json.loads((out / "report.json").read_text()), out


def test_report_files_and_schema(devnet_report):
    report, out = devnet_report
    assert (out / "heldout_loss.png").stat().st_size > 1000 and (out / "nodes.png").stat().st_size > 1000
    assert set(report) == {"config", "rounds", "final", "reports"}
    assert [r["round"] for r in report["rounds"]] == [0, 1]
    for r in report["rounds"]:
        assert r["model_hash"].startswith("0x") and len(r["model_hash"]) == 66
        for m in r["miners"]:
            assert set(m) == {"address", "kind", "committed", "steps", "class", "stage", "check", "committee", "drawn",
                              "verified", "score", "reward", "slashed"}
            # four validators and the default committee of three seats: in round 0 the seats decide
            # each column; once the lazy validator lost its permit, three decide everything
            validators = {f["address"] for f in report["final"] if f["role"] == "validator"}
            if m["committee"] is not None:
                assert 0 < sum(m["committee"].values()) <= 3 and set(m["committee"]) <= validators, m
                assert len(m["drawn"]) == 6 and set(m["committee"]) <= set(m["drawn"]) <= validators, m
            else:
                assert m["drawn"] is None, m
            assert m["committee"] is not None or r["round"] > 0 or not m["committed"]
            assert m["steps"] == 30 if m["committed"] else m["steps"] is None  # every miner fits H here
            # one class, held by every validator: each committed miner is checked bit for bit
            assert m["check"] == ("exact" if m["committed"] else None) and m["class"] == "cpu/avx2/1t/float32"
        assert 0 < r["commit_s"] <= 300
    roles = sorted(f["role"] for f in report["final"])
    assert roles == ["miner"] * 5 + ["validator"] * 4


HONEST_MINERS = ("honest", "serve-late")


def test_honest_miners_are_paid_every_round_and_never_flagged(devnet_report):
    report, _ = devnet_report
    for r in report["rounds"]:
        honest = [m for m in r["miners"] if m["kind"] in HONEST_MINERS]
        assert len(honest) == 3
        assert all(m["committed"] and m["verified"] and m["reward"] > 0 and m["slashed"] == 0 for m in honest)
    for f in report["final"]:
        if f["kind"] in HONEST_MINERS or (f["role"] == "validator" and f["kind"] == "honest"):
            assert f["slashed"] == 0 and f["claimed"] > 0, f


def _by_kind(report: dict, kind: str) -> str:
    return next(f["address"] for f in report["final"] if f["kind"] == kind)


def test_a_miner_slow_to_serve_one_validator_is_not_slashed_and_that_report_is_void(devnet_report):
    """The refused validator asks every other node next: one that fetched the leaf already serves
    it (a check's part often is, leaf 0's `ef` is tiny), and then nothing is reported. If nobody
    does, its report is voided by voters the miner serves. Either way the miner is paid."""
    report, _ = devnet_report
    slow = _by_kind(report, "serve-late")
    against = [rep for rep in report["reports"] if rep["accused"] == slow]
    assert all(rep["status"] == "void" and rep["bond_burned"] == 0 for rep in against)
    final = next(f for f in report["final"] if f["kind"] == "serve-late")
    assert final["slashed"] == 0
    rounds = [m for r in report["rounds"] for m in r["miners"] if m["kind"] == "serve-late"]
    assert rounds and all(m["verified"] and m["reward"] > 0 for m in rounds)


def test_withholding_from_the_challenger_does_not_protect_a_faked_segment(devnet_report):
    report, _ = devnet_report
    cheat = _by_kind(report, "withhold-challenger")
    rounds = [m for r in report["rounds"] for m in r["miners"] if m["kind"] == "withhold-challenger"]
    assert all(m["verified"] is False and m["reward"] == 0 and m["score"] == 0 for m in rounds)
    against = [rep for rep in report["reports"] if rep["accused"] == cheat]
    # the challenger saw the faked checkpoints withheld; the voters fetched both ends and replayed
    assert any(rep["kind"] == "unavailable" and rep["status"] == "confirmed" for rep in against)
    assert next(f for f in report["final"] if f["kind"] == "withhold-challenger")["slashed"] > 0


def test_a_validator_that_never_replays_is_reported_slashed_and_unpaid(devnet_report):
    report, _ = devnet_report
    lazy = _by_kind(report, "lazy-validator")
    confirmed = {rep["round"] for rep in report["reports"]
                 if rep["accused"] == lazy and rep["kind"] == "lazy_validator" and rep["status"] == "confirmed"}
    assert 0 in confirmed  # slashed below the validator minimum, it has no permit after
    final = next(f for f in report["final"] if f["kind"] == "lazy-validator")
    assert final["slashed"] > 0 and final["claimed"] == 0 and final["claimable"] == 0


def test_honest_validators_are_never_reported_and_their_reports_never_rejected(devnet_report):
    report, _ = devnet_report
    honest = {f["address"] for f in report["final"] if f["role"] == "validator" and f["kind"] == "honest"}
    assert all(rep["status"] != "rejected" for rep in report["reports"] if rep["reporter"] in honest)
    assert not [rep for rep in report["reports"] if rep["accused"] in honest]


def test_lazy_miner_is_caught_slashed_and_unpaid(devnet_report):
    report, _ = devnet_report
    lazy_rounds = [m for r in report["rounds"] for m in r["miners"] if m["kind"] == "lazy"]
    assert lazy_rounds[0]["committed"] and lazy_rounds[0]["verified"] is False
    assert all(m["reward"] == 0 and m["score"] == 0 for m in lazy_rounds)
    lazy_final = next(f for f in report["final"] if f["kind"] == "lazy")
    assert lazy_final["slashed"] > 0 and lazy_final["claimed"] == 0


def test_heldout_loss_goes_down(devnet_report):
    report, _ = devnet_report
    losses = [r["heldout_loss"] for r in report["rounds"]]
    assert losses[-1] < losses[0]


def test_miners_free_checkpoints_nobody_can_ask_for(devnet_report):
    """Each finalized round's checkpoints are deleted, and no report is resolved before the
    votes on it are in: voters fetch the checkpoints while it is open."""
    _, out = devnet_report
    logged = records(out / "devnet.log")  # JSON lines, one field set per event
    pruned = [i for i, e in enumerate(logged) if e["event"] == "pruned checkpoints" and e.get("round") == 0]
    # members are numbered honest miners first: miner0 and miner1 honest
    assert {node_of(logged[i]) for i in pruned} >= {"miner0", "miner1"}
    resolved = {e["report"]: i for i, e in enumerate(logged) if e["event"] == "report resolved"}
    voted = [(e["report"], i) for i, e in enumerate(logged) if e["event"] == "voted"]
    assert voted and all(i < resolved[rid] for rid, i in voted if rid in resolved)
    first_resolution = min(resolved.values())
    assert all(i > first_resolution for i in pruned if node_of(logged[i]) == "miner2"), "round freed while its report was open"
