"""Capacity-scaled work in a whole network (`veritrain devnet --throttled 1`): one honest miner
on a machine a third as fast trains fewer steps and commits in every round and is verified (its
pay is its update's usefulness, like everyone's), and the commit phase closes when everyone has
committed, well inside its window.

The same network rides out a silent validator (`--validators 3 --silent-validators 1`): it
checks and commits its scores (so the scoring phase still closes early) but never reveals nor
signs; the two others settle every round without a fallback and are paid, it earns nothing, and
with `--absence-rounds 1` they end its permit as soon as round 0 has ended.

The window (20 s) holds H = 600 micro steps in half of it for an honest miner on any machine CI has
had (0.003-0.010 s a step), while the throttled miner, a third as fast and at most 40 steps a second,
fits at most 400 there on any machine (on a fast one 600 steps would otherwise fit even a third as
fast, and both would plan H). The window is long enough that a miner that planned its steps from a
start-up measurement still commits when another test's network shares the two cores (under
pytest-xdist a 10 s window was missed), while each miner's steps stay in the range where an update
still helps held-out loss: 8 pages per miner trained for 960 steps or more overfit, score 0 and
would be paid nothing.
With fixed work the throttled miner would miss every round."""

from __future__ import annotations

import json

import pytest

from tests.conftest import run_cli
from tests.integration.json_log import node_of, records

pytestmark = pytest.mark.slow

WINDOW = 20  # seconds of commit phase
H = 600


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("devnet-capacity")
    result = run_cli("devnet", "--miners", "3", "--throttled", "1", "--validators", "3", "--silent-validators", "1",
                     "--absence-rounds", "1", "--rounds", "2",
                     "--preset", "micro", "--commit-window", str(WINDOW), "--inner-steps", str(H),
                     "--checkpoint-every", "60", "--out", str(out), "--timeout", "500", timeout=700)
    assert result.code == 0, (result.stdout[-2000:], result.stderr[-3000:])
    return json.loads((out / "report.json").read_text()), records(out / "devnet.log")


def test_the_throttled_miner_trains_fewer_steps_and_takes_part_in_every_round(report):
    data, _ = report
    for r in data["rounds"]:
        by_kind = {k: [m for m in r["miners"] if m["kind"] == k] for k in ("honest", "throttled")}
        (slow,) = by_kind["throttled"]
        assert all(m["committed"] and m["verified"] and m["slashed"] == 0 for m in r["miners"]), r
        # pay is usefulness: a compressed micro update at H = 600 helps the held-out loss for most
        # honest miners but not for each in every round (the validators log why: `miners scored 0`,
        # "no held-out gain"), so only the round's pay is asserted here
        assert sum(m["reward"] for m in r["miners"]) > 0, r
        # fewer than the fastest honest miner: an honest one measured while the others boot on
        # the same two cores may plan as little as the throttled one (CI: 720 against 720)
        assert slow["steps"] % 60 == 0 and 60 <= slow["steps"] <= 360, r
        assert slow["steps"] < max(m["steps"] for m in by_kind["honest"]), r
        # its pay is its steps times its update's quality: held-out gain varies between miners more
        # than it grows with a third more or fewer steps here, so no order against the fast miners is asserted
        assert r["fallback"] is False


def test_the_commit_phase_closes_inside_its_window_once_all_committed(report):
    data, _ = report
    for r in data["rounds"]:
        assert r["commit_s"] is not None and r["commit_s"] < WINDOW, r


def test_the_throttled_miner_measured_itself_slower(report):
    """Its step time (the median step, as each miner logs it at start) is well above the fastest
    honest miner's: 3x its own steps. The honest ones are measured while every node boots on the
    same cores, so one of them may read as slow as the throttled one (CI: 0.010 s for both
    against 0.003 s for the fastest); no order against that one is asserted."""
    _, log = report
    times = {node_of(e): float(e["s_per_step"]) for e in log if e["event"] == "throughput"}
    assert len(times) == 3, times
    throttled = times.pop("miner2")  # the devnet lists the honest miners first, then the throttled one
    assert throttled > 1.5 * min(times.values()), (throttled, times)


def test_a_silent_validator_of_three_is_ridden_out_and_earns_nothing(report):
    data, _ = report
    assert all(r["fallback"] is False for r in data["rounds"]), [r["fallback"] for r in data["rounds"]]
    honest = [f for f in data["final"] if f["role"] == "validator" and f["kind"] == "honest"]
    assert len(honest) == 2 and all(f["claimed"] > 0 and f["slashed"] == 0 for f in honest), honest
    (silent,) = [f for f in data["final"] if f["kind"] == "silent-validator"]
    assert silent["claimed"] == 0, silent


def test_the_honest_validators_end_the_silent_ones_permit(report):
    data, log = report
    (silent,) = [f["address"] for f in data["final"] if f["kind"] == "silent-validator"]
    retired = [e for e in log if e["event"] == "absent validator retired"]
    assert [e["validator"] for e in retired] == [silent], retired  # once: the others' estimates revert
