"""Disputes' `aggregate` reports (PROTOCOL.md §12, §13.9): a validator that signed a wrong partial
sum of the aggregation tree is slashed by a confirmed report, filed in the round's aggregate
phase (audit closed, until `aggregate_window` after the audit deadline); the report never holds
up the round's result nor changes its payouts, and a rejected one costs its filer the bond."""

import boa
from conftest import (
    BPS,
    STATUS_CONFIRMED,
    STATUS_REJECTED,
    TOKEN,
    VOTE_CONFIRM,
    VOTE_REJECT,
    World,
    keyed_world,
    last_logs,
)

KIND_AGGREGATE = 6
NODE = 2  # the node's position in the tree (off-chain: voters recompute it)
CLAIMED = b"\x0b" * 32  # the partial-sum hash the accused signed
CLAIM_SIG = b"\x0a" * 64  # its node-key signature of that claim (checked off-chain by every voter)


kworld_base = keyed_world(validator_stakes=(300 * TOKEN, 200 * TOKEN, 200 * TOKEN))  # three miners, BLS keys


def report_aggregate(w: World, accused, reporter) -> int:
    return w.d.report_fraud(0, accused, KIND_AGGREGATE, NODE, CLAIMED, CLAIM_SIG, sender=reporter)


def test_a_confirmed_aggregate_report_slashes_the_server_without_holding_up_the_result(kworld: World):
    w = kworld
    d, st, p = w.d, w.st, w.stack.params
    v0, v1, liar = w.validators
    w.to_result(0)
    before = w.t.balanceOf(v0)
    rid = report_aggregate(w, liar, v0)
    (ev,) = last_logs(d, "FraudReported")
    assert (ev.miner, ev.kind, ev.segment, ev.evidence_hash, ev.challenge_sig) == (liar, KIND_AGGREGATE, NODE,
                                                                                  CLAIMED, CLAIM_SIG)
    assert d.open_in_round(0) == 0 and st.open_reports(liar) == 1  # the result does not wait; the stake does
    posted = w.post(0)
    with boa.reverts("disputes: accused cannot vote"):
        d.vote_fraud(rid, VOTE_REJECT, sender=liar)
    d.vote_fraud(rid, VOTE_CONFIRM, sender=v1)
    assert d.resolve_fraud(rid) == STATUS_CONFIRMED  # everyone who may vote voted
    slashed = 200 * TOKEN * p.slash_bps // BPS
    assert st.staked(liar) == 200 * TOKEN - slashed and d.slashed_in_round(0, liar)
    assert w.t.balanceOf(v0) == before + slashed * p.reporter_share_bps // BPS  # the bond came back too
    assert not w.s.forfeited(0, liar) and st.open_reports(liar) == 0  # no payout of the round changed
    w.finalize(posted)


def test_a_rejected_aggregate_report_burns_the_bond_and_leaves_the_server_whole(kworld: World):
    w = kworld
    d, st = w.d, w.st
    v0, honest, v2 = w.validators
    w.to_result(0)
    before, supply = w.t.balanceOf(v0), w.t.totalSupply()
    rid = report_aggregate(w, honest, v0)
    d.vote_fraud(rid, VOTE_REJECT, sender=v2)  # it recomputed the node: the claim is right
    assert d.resolve_fraud(rid) == STATUS_REJECTED
    bond = w.stack.params.report_bond  # one other voter
    assert st.staked(honest) == 200 * TOKEN and not d.slashed_in_round(0, honest)
    assert w.t.balanceOf(v0) == before - bond and w.t.totalSupply() == supply - bond


def test_aggregate_reports_are_filed_only_in_the_aggregate_phase_against_a_revealed_validator(kworld: World):
    w = kworld
    v0, v1, silent = w.validators
    w.to_scoring(0)
    for v in w.validators:
        w.commit_scores(0, v, [1000] * 3)
    for v in (v0, v1):
        w.reveal(0, v)
    with boa.reverts("disputes: accused did not reveal"):  # a tree node's servers revealed
        report_aggregate(w, silent, v0)
    boa.env.time_travel(seconds=w.stack.params.reveal_duration)
    with boa.reverts("disputes: aggregate reporting closed"):  # audits open: the selection is not fixed
        report_aggregate(w, v1, v0)
    with boa.reverts("disputes: cannot report self"):
        report_aggregate(w, v0, v0)
    w.finish_audits(0)
    report_aggregate(w, v1, v0)
    boa.env.time_travel(seconds=w.stack.params.audit_duration + w.stack.params.result_duration)
    with boa.reverts("disputes: aggregate reporting closed"):  # past the audit deadline + aggregate window
        report_aggregate(w, v0, v1)
