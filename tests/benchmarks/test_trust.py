"""`python -m benchmarks trust --quick`: shape, exact probabilities, and that cheating never pays."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from fractions import Fraction
from pathlib import Path

import pytest

from benchmarks import trust, trust_stages
from protocol.devnet.cheats import CHEATS

FIELDS = {"attack", "p_detect", "p_detect_measured", "slash", "gain", "expected_profit"}
# rows that are allowed not to be negative, and why (see the module docstring)
HARMLESS = {"witness bought from an honest miner"}
BLOCKED_AT_ZERO = {"late sybil miners closing the commit phase", "validator-set squatting",
                   "unadmitted peers (no stake)", "copying a peer's bytes before the close",
                   "registering a class nobody else runs (honest miners in it)",
                   "aggregator withholds its partial sum",  # unpaid work withheld: nothing gained or lost
                   "stage withholds what it received (its sender serves it)",
                   "stage equivocates (two signed tensors for one slot)"}
FIEF = "rare-class fief: its only holder (at min_class_stake) + 3 untrained identities"
# a colluder's reject ties the honest confirm among 2 validators: no majority, no report
NEED_THREE_VALIDATORS = {"decoy report by a colluding validator", "witness bought from a cheating miner (lazy 1/10)"}


@pytest.fixture(scope="module")
def result(tmp_path_factory: pytest.TempPathFactory) -> dict:
    out = tmp_path_factory.mktemp("trust") / "trust.json"
    assert trust.main(["--quick", "--json", str(out)]) == 0
    return json.loads(Path(out).read_text())


def rows(result: dict) -> dict[str, dict]:
    return {r["attack"]: r for r in result["figures"]["rows"]}


def test_json_shape(result: dict) -> None:
    assert set(result) >= {"figures", "params"}
    assert result["params"]["n_segments"] == 10 and result["params"]["q"] == 1
    for r in result["figures"]["rows"]:
        assert FIELDS <= set(r)
        assert 0 <= r["p_detect"] <= 1
        assert r["p_detect_measured"] is None or 0 <= r["p_detect_measured"] <= 1


def test_every_named_cheat_has_a_row(result: dict) -> None:
    names = {name for _, name, *_ in trust.MINER_CHEATS}
    assert set(CHEATS) <= names | {"withhold-challenger", "serve-late"}  # serve-late is honest
    measured = [r for r in result["figures"]["rows"] if r["p_detect_measured"] is not None]
    audited = {"never-replaying validator", "half-replaying validator", "validator skipping one miner"}
    staged = {trust_stages.LAZY, trust_stages.COLLUDE, trust_stages.LIE, trust_stages.FORK}
    assert {r["attack"] for r in measured} == {a for a, *_ in trust.MINER_CHEATS} | audited | {trust.SPOOF} | staged


def test_p_detect_matches_the_hypergeometric_formula(result: dict) -> None:
    n, q, v = 10, 1, result["params"]["validators"]
    escape = math.comb(n - 1, q) / math.comb(n, q)  # one faked segment, one validator
    assert rows(result)["lazy, 1/10 segments"]["p_detect"] == pytest.approx(1 - escape ** v)
    escape5 = Fraction(math.comb(n - 5, q), math.comb(n, q))
    assert rows(result)["lazy, 5/10 segments"]["p_detect_exact"] == str(1 - escape5 ** v)
    # audits: a validator that skipped 2 of 4 miners, one other validator auditing 2 of them
    p4 = trust.default_params(validators=4)
    a = p4.audit_sample
    miss = Fraction(math.comb(2, a), math.comb(4, a))
    half = next(r for r in trust.exact_rows(p4) if r.attack == "half-replaying validator")
    assert half.p_detect == 1 - miss ** 3


def test_measured_detection_is_near_exact(result: dict) -> None:
    for r in result["figures"]["rows"]:
        if r["p_detect_measured"] is None:
            continue
        if r["p_detect"] == 1:  # derivation, binding and all-segment cheats: every check
            assert r["p_detect_measured"] == 1, r["attack"]
        else:  # a handful of trials: only a loose band
            assert abs(r["p_detect_measured"] - r["p_detect"]) < 0.5, r["attack"]


def test_cheating_never_pays(result: dict) -> None:
    v = result["params"]["validators"]
    for r in result["figures"]["rows"]:
        if r["attack"] in HARMLESS:
            assert r["note"] and r["expected_profit"] > 0
        elif r["attack"] in BLOCKED_AT_ZERO:
            assert r["note"] and r["expected_profit"] == 0
        elif r["attack"] in NEED_THREE_VALIDATORS and v < 3:
            assert r["note"] and "not negative" in r["note"]
        else:
            assert r["expected_profit"] < 0 and r["note"] is None, r["attack"]


def test_from_three_validators_only_the_harmless_and_blocked_rows_are_not_negative() -> None:
    for v in (3, 4, 5, 8):
        for r in trust.exact_rows(trust.default_params(validators=v)):
            if r.attack not in HARMLESS | BLOCKED_AT_ZERO:
                assert r.expected_profit < 0, (v, r.attack)


def test_hardware_class_rows_price_the_class_minimum_and_the_tolerance_discount() -> None:
    p = trust.default_params()
    by = {r.attack: r for r in trust.class_rows(p)}
    below = by["lazy miner + its class's only holder (below min_class_stake)"]
    fief = by[FIEF]  # half of the stake, at the class minimum: still not the class's decider
    for row in (below, fief):
        # the lazy work is scored 0 by everyone: it loses what it saved and the holder its agreement
        assert row.p_detect == 1 and row.slash > row.gain > 0 and row.expected_profit < 0, row
    assert by["registering a class nobody else runs (honest miners in it)"].expected_profit == 0
    spoof = by["tolerance-mode spoofing (claims a class nobody holds, lazy 1/10)"]
    assert spoof.gain == p.reward / 10 - p.reward / 2  # 1/10 of the work skipped, half the pay discounted
    assert 0 < spoof.p_detect < 1 and spoof.expected_profit < spoof.gain < 0
    no_discount = next(r for r in trust.class_rows(replace(p, tolerance_discount=Fraction(1)))
                       if r.attack == spoof.attack)
    assert no_discount.expected_profit > 0  # without the discount, dodging exact checks would pay


def test_tolerance_spoofing_detection_is_measured_through_tolerance_checks(result: dict) -> None:
    spoof = rows(result)[trust.SPOOF]
    # the lazy trace's faked segment fails a tolerance check: some rounds a majority finds it
    assert spoof["trials"] == 300 and 0 < spoof["p_detect_measured"] < 0.1, spoof
    assert abs(spoof["p_detect_measured"] - spoof["p_detect"]) < 0.05


def test_report_and_demand_rows_are_measured_on_the_real_contracts(result: dict) -> None:
    prm, chain, by = result["params"], result["reports"], rows(result)
    others = prm["validators"] - 1
    false = next(r for a, r in by.items() if a.startswith("false report"))
    # the false report's bond, report_bond per other voter, left its filer and was burned
    assert chain["false_report"] == {"status": 3, "filer_change": -prm["report_bond"] * others,
                                     "accused_stake_change": 0}
    assert false["slash"] == prm["report_bond"] * others > others * prm["reward_R"] / prm["n_segments"]
    # voted served late: void, the accused fined late_serve_fee from its stake, the bond returned
    assert chain["late_serve"] == {"status": 4, "filer_change": 0, "accused_stake_change": -prm["late_serve_fee"]}
    assert by["late serve (checkpoint served only on the voters' retry)"]["slash"] == prm["late_serve_fee"] > 0
    # each answered demand moves the bond from the demander to the answerer; the 25th is refused
    assert (chain["demand_change"], chain["answer_change"]) == (-prm["challenge_bond"], prm["challenge_bond"])
    assert chain["demands_made"] == 24 and chain["refused"] == "demands: demand cap reached"
    assert by["leaf demand spam against an honest root (each answered)"]["slash"] == prm["challenge_bond"] > 0
    for r in (false, by["late serve (checkpoint served only on the voters' retry)"]):
        assert r["formula"].startswith("-loss, measured on chain"), r


def test_report_quorum_follows_protocol_section_12() -> None:
    assert trust.confirmed(2, 0, 2)  # both honest validators confirm
    assert not trust.confirmed(1, 1, 2)  # the other one rejects: a tie is no majority
    assert trust.confirmed(2, 1, 3)  # two of three confirm: a colluder cannot block
    assert not trust.confirmed(2, 2, 4)  # exactly half is not more than half
    assert trust.confirmed(3, 1, 4)
    assert not trust.confirmed(1, 0, 1)  # nobody besides the reporter


def test_more_stake_at_risk_lowers_profit() -> None:
    p = trust.default_params()
    richer = replace(p, miner_stake=p.miner_stake * 10)
    lazy = [r for r in trust.exact_rows(p) if r.attack == "lazy, 1/10 segments"][0]
    lazy_rich = [r for r in trust.exact_rows(richer) if r.attack == "lazy, 1/10 segments"][0]
    assert lazy_rich.expected_profit < lazy.expected_profit < 0


def test_committee_rows_price_capture_exactly_and_never_pay_once_scores_are_audited(result: dict) -> None:
    """A captured committee's inflated score is caught unless every drawn seat is the coalition's
    (and no drawn auditor samples it), at the devnet's size and at 64 validators x 1,024 miners."""
    from fractions import Fraction

    from benchmarks.trust_committees import committee_rows
    from protocol.core.settlement.committee_odds import p_majority

    by = rows(result)
    for size in (3, 5, 7):
        for share in ("10%", "20%", "33%"):
            assert f"committee captured (c = {size}, coalition {share}): inflated score" in by
    for v, n in ((6, 12), (6, 13), (64, 1024)):  # committee networks: every row, zeroing included
        for r in committee_rows(trust.default_params(validators=v, miners=n)):
            assert r.expected_profit < 0 and r.note is None, (v, n, r.attack)
    p = trust.default_params(validators=6, miners=13)
    third = next(r for r in committee_rows(p) if r.attack == "committee captured (c = 3, coalition 33%): inflated score")
    assert third.expected_profit == p_majority(Fraction(1, 3), 3) * ((1 - third.p_detect) * third.gain
                                                                       - third.p_detect * third.slash)
    assert 1 - third.p_detect <= Fraction(1, 3) ** 6 / p_majority(Fraction(1, 3), 3)  # all six seats captured, at most


def test_a_zero_without_a_report_is_priced_as_a_caught_lie_and_a_false_report_loses_its_bond() -> None:
    """Deflation: a captured committee zeroing an honest miner either leaves its zeros unreported
    (audited like the inflated lie) or backs them with one false report (its bond burns); it takes
    the better of the two. With three validators a third of the stake gains more than that bond,
    and the table says so."""
    from fractions import Fraction

    from benchmarks.trust_committees import committee_rows
    from protocol.core.settlement.committee_odds import p_majority

    p = trust.default_params(validators=6, miners=12)
    row = next(r for r in committee_rows(p) if r.attack == "committee captured (c = 3, coalition 33%): zeroes an honest miner")
    gain = Fraction(1, 3) * p.reward
    assert row.gain == gain
    unreported = (1 - row.p_detect) * gain - row.p_detect * p.validator_slash
    assert row.expected_profit == p_majority(Fraction(1, 3), 3) * max(unreported, gain - p.report_bond * 5) < 0
    small = trust.default_params(validators=3, miners=4)
    row = next(r for r in committee_rows(small) if r.attack.startswith("committee captured (c = 3, coalition 33%): zeroes"))
    assert row.expected_profit > 0 and row.note is not None and "report_bond" in row.note


def test_aggregation_rows_never_pay_at_the_devnet_nor_at_the_bounds() -> None:
    """A lone liar is blocked by its co-server; a colluding pair is caught by the honest validators'
    tree audits with p = 1 - (1 - a)^(V - k), and loses at every scale the table prices; with no
    audits it would profit, which is what the audits are for."""
    from fractions import Fraction

    from benchmarks.trust_aggregation import aggregation_rows, capture, caught
    from protocol.config.run_config import ChainParams

    rows = aggregation_rows(trust.default_params())
    assert all(r.expected_profit <= 0 for r in rows), [(r.attack, r.expected_profit) for r in rows]
    pair = next(r for r in rows if r.attack.startswith("aggregator and checker collude (1024 validators")
                and "33%" in r.attack)
    k = round(Fraction(1, 3) * 1024)
    assert pair.p_detect == caught(1024, k, 5461, ChainParams().tree_audits) and pair.expected_profit == capture(1024, k) * (
        (1 - pair.p_detect) * pair.gain - pair.p_detect * pair.slash)
    unaudited = aggregation_rows(trust.default_params(), audits=0)
    assert any(r.expected_profit > 0 and r.note is not None for r in unaudited)


def test_each_stage_attack_fails_the_real_check_in_exactly_its_segment_and_honest_stages_never(result: dict) -> None:
    """The measured round: a lazy stage fails its replay only in the segment it skipped, the
    colluding pair's sender only where it sent the wrong activation (its receiver replays exactly:
    asserted inside), the lying receiver only where it committed an unsigned hash, the forking
    sender only where its neighbour holds its signature of another tensor; every honest stage
    replays exactly. The stage rows never pay (priced at R/S a stage)."""
    failing = trust_stages._failing_segments()
    assert failing == {trust_stages.LAZY: (1, {3}), trust_stages.COLLUDE: (1, {7}), trust_stages.LIE: (2, {6}),
                       trust_stages.FORK: (1, {7})}
    by = rows(result)
    for attack in failing:
        assert by[attack]["p_detect_exact"] == by[trust_stages.LAZY]["p_detect_exact"]
        assert by[attack]["expected_profit"] < 0 and by[attack]["trials"] == 30
    assert by["stage falls silent mid-round"]["expected_profit"] < 0
