"""A network of mixed hardware classes (docs/PROTOCOL.md §10.5): miners of three classes (A, B, C),
validators registered for B, one of which runs A (a false-class validator).

- Every round settles on one attested model, which every miner fetched and checked against the
  chain's hash before training on it (aggregation is exact on every class).
- Miners of B, whose holders hold the class minimum and 2/3 of the stake, are checked bit for bit
  by those validators alone; the miners of A and C, which no validator holds, are checked by
  everyone in tolerance mode, flagged, still paid.
- The false-class validator replays class-B miners under class A, gets mismatches and reports
  them; the honest class-B validators reject the reports, so its bonds burn and nobody honest is
  slashed. Its stake is below the honest holders', so it cannot drag the class's scores down.
"""

from __future__ import annotations

import dataclasses

import pytest

from protocol.core.hardware.replay_profile import ReplayProfile
from protocol.devnet.network import FALSE_CLASS, DevnetOptions, run_devnet
from protocol.devnet.report import build_report

pytestmark = pytest.mark.slow

A, B, C = "cpu/avx2/1t/float32", "cpu/avx2/2t/float32", "cpu/default/1t/float32"
CLASSES = [dataclasses.asdict(p) for p in (ReplayProfile(threads=1), ReplayProfile(threads=2),
                                            ReplayProfile(threads=1, cpu_capability="default"))]
ROUNDS = 2


@pytest.fixture(scope="module")
def network(tmp_path_factory):
    out = tmp_path_factory.mktemp("devnet-classes")
    opts = DevnetOptions(miners=3, validators=3, rounds=ROUNDS, preset="micro", out=out, timeout_s=1200,
                         miner_classes=(A, B, C), validator_classes=(B, B, B), false_class_validators=1,
                         training={"classes": CLASSES, "compute": {"inner_steps": 12, "checkpoint_every": 3}},
                         # a class needs 300 of validator stake (the devnet's default: one validator's) and
                         # 2/3 of the round's; the false-class one stakes 200, so it never covers B alone
                         # a wide commit window: the no-SIMD class is slow, and under CI's load (other devnets
                         # on the same 2 cores) its round 0 has missed 60 s; the phase closes once all commit.
                         # A wide report window too: a report resolves as soon as both class-B holders voted,
                         # but under that load the honest one's replay has missed 20 s, and a report nobody
                         # answered in time is void (the liar's bond comes back)
                         chain={"commit_duration": 150, "challenge_window": 60})
    admin, members, crashed, _ = run_devnet(opts, lambda line: None)
    assert not crashed, crashed
    return build_report(admin, members, {}, ROUNDS), members


def test_every_round_attests_one_model_that_every_miner_checked_and_trained_on(network):
    report, _ = network
    hashes = [r["model_hash"] for r in report["rounds"]]
    assert len(set(hashes)) == ROUNDS  # a new model each round, none fell back
    for r in report["rounds"]:
        assert r["fallback"] is False
        assert all(m["committed"] for m in r["miners"]), r  # round r+1's miners hashed the model of round r


def test_the_class_held_is_checked_exactly_and_the_classes_nobody_holds_in_flagged_tolerance(network):
    report, _ = network
    for r in report["rounds"]:
        by_class = {m["class"]: m for m in r["miners"]}
        assert {c: m["check"] for c, m in by_class.items()} == {A: "tolerance", B: "exact", C: "tolerance"}, r
        assert all(m["verified"] and m["reward"] > 0 and m["slashed"] == 0 for m in r["miners"]), r


def test_the_false_class_validator_reports_honest_miners_and_loses_its_bonds(network):
    report, members = network
    (liar,) = [m.address for m in members if m.kind == FALSE_CLASS]
    b_miner = next(m["address"] for m in report["rounds"][0]["miners"] if m["class"] == B)
    mine = [rep for rep in report["reports"] if rep["reporter"] == liar]
    replay = [rep for rep in mine if rep["accused"] == b_miner]
    outcomes = [(rep["id"], rep["status"], rep["bond_burned"]) for rep in replay]
    assert replay and all(status == "rejected" and burned > 0 for _, status, burned in outcomes), outcomes
    assert not [rep for rep in mine if rep["status"] == "confirmed"], mine
    honest = {m.address for m in members if m.kind != FALSE_CLASS}
    assert not [rep for rep in report["reports"] if rep["accused"] in honest and rep["status"] == "confirmed"]
