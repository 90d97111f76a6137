"""Disputes: fraud reports, votes, outcomes, slashing, and forfeits the round's result honours."""

import boa
import pytest
from conftest import (
    BPS,
    KIND_DERIVATION,
    KIND_REPLAY,
    KIND_UNAVAILABLE,
    SIG,
    STATUS_CONFIRMED,
    STATUS_OPEN,
    STATUS_REJECTED,
    STATUS_VOID,
    TOKEN,
    VOTE_CONFIRM,
    VOTE_REJECT,
    VOTE_SERVED,
    Params,
    World,
    join,
    keyed_world,
    last_logs,
    make_world,
    partial,
)

EVIDENCE = b"\x09" * 32

kworld_base = keyed_world()  # 3 miners, validators of 300 and 200 with BLS keys


@pytest.fixture
def world(kworld) -> World:
    return kworld


def report(w: World, miner, reporter, rnd: int = 0, kind: int = KIND_REPLAY) -> int:
    return w.d.report_fraud(rnd, miner, kind, 3, EVIDENCE, SIG, sender=reporter)


def resolve_after_window(w: World, rid: int) -> int:
    boa.env.time_travel(seconds=w.stack.params.challenge_window)
    return w.d.resolve_fraud(rid)


# -- deploy ---------------------------------------------------------------------------------------


def test_constructor_reverts_and_unbonding_bound():
    w = make_world(start=False)
    t, st, r, rw = w.t.address, w.st.address, w.stack.rounds.address, w.stack.rewards.address
    with boa.reverts("disputes: bad fraction"):
        partial("Disputes").deploy(t, st, r, rw, 1, 60, BPS + 1, 0, 3, 16, 0, 100)
    with boa.reverts("disputes: bad fraction"):
        partial("Disputes").deploy(t, st, r, rw, 1, 60, 0, BPS + 1, 3, 16, 0, 100)
    with boa.reverts("disputes: absence rounds above 16"):
        partial("Disputes").deploy(t, st, r, rw, 1, 60, 0, 0, 17, 16, 0, 100)
    with boa.reverts("disputes: zero report cap"):
        partial("Disputes").deploy(t, st, r, rw, 1, 60, 0, 0, 3, 0, 0, 100)
    with boa.reverts("disputes: zero challenge window"):
        partial("Disputes").deploy(t, st, r, rw, 1, 0, 0, 0, 3, 16, 0, 100)
    with boa.reverts("disputes: zero aggregate window"):
        partial("Disputes").deploy(t, st, r, rw, 1, 60, 0, 0, 3, 16, 0, 0)
    # delay 600 must exceed 4 x 60 phases (commit, score, reveal, audit) + the aggregate phase + window
    with boa.reverts("disputes: unbonding delay too short"):
        partial("Disputes").deploy(t, st, r, rw, 1, 260, 0, 0, 3, 16, 0, 100)
    d = partial("Disputes").deploy(t, st, r, rw, 1, 259, BPS, BPS, 16, 1, 0, 100)
    assert (d.challenge_window(), d.slash_bps(), d.reporter_share_bps(), d.aggregate_window()) == (259, BPS, BPS, 100)


# -- report ---------------------------------------------------------------------------------------


def test_report_takes_bond_and_opens_a_window(world: World):
    d, p = world.d, world.stack.params
    v0, v1 = world.validators
    m = world.miners[0]
    world.to_scoring(0)
    before = world.t.balanceOf(v0)
    rid = d.report_fraud(0, m, KIND_UNAVAILABLE, 7, EVIDENCE, b"\x44" * 64, sender=v0)
    logs = last_logs(d)
    assert rid == 1 == d.report_count()
    (rep,) = [e for e in logs if type(e).__name__ == "FraudReported"]
    assert (rep.report_id, rep.round, rep.miner, rep.reporter, rep.kind, rep.segment, rep.evidence_hash,
            rep.challenge_sig, rep.deadline) == (1, 0, m, v0, KIND_UNAVAILABLE, 7, EVIDENCE, b"\x44" * 64,
                                                 boa.env.timestamp + p.challenge_window)
    (vote,) = [e for e in logs if type(e).__name__ == "FraudVoted"]
    assert (vote.report_id, vote.validator, vote.vote, vote.weight) == (1, v0, VOTE_CONFIRM, 300 * TOKEN)
    r = d.reports(rid)
    assert (r.round, r.miner, r.reporter, r.status, r.confirm_weight, r.votes, r.confirms_by_others) == (
        0, m, v0, STATUS_OPEN, 300 * TOKEN, 1, 0)
    assert world.t.balanceOf(v0) == before - p.report_bond
    assert d.total_bonds() == p.report_bond == world.t.balanceOf(d.address)
    assert d.report_of(0, m, v0) == rid and d.report_of(0, m, v1) == 0 and d.vote_of(rid, v0) == VOTE_CONFIRM
    assert world.st.open_reports(m) == 1 and world.s.open_reports(0, m) == 1


def test_a_validator_files_at_most_max_reports_a_round_and_others_still_report():
    """Every report makes every voter re-check: a griefer's reports are capped per round, and the
    cap is per reporter, so an honest validator still reports whatever a griefer filed."""
    w = make_world(Params(max_reports=2), n_miners=3)
    d = w.d
    v0, v1 = w.validators
    m0, m1, m2 = w.miners
    w.to_scoring(0)
    for m in (m0, m1):
        d.report_fraud(0, m, KIND_UNAVAILABLE, 0, EVIDENCE, b"\x44" * 64, sender=v0)
    with boa.reverts("disputes: report cap reached"):
        d.report_fraud(0, m2, KIND_UNAVAILABLE, 0, EVIDENCE, b"\x44" * 64, sender=v0)
    d.report_fraud(0, m2, KIND_UNAVAILABLE, 0, EVIDENCE, b"\x44" * 64, sender=v1)
    assert (d.reports_filed(0, v0), d.reports_filed(0, v1), d.report_count()) == (2, 1, 3)


def scoring_three(params: Params | None = None) -> World:
    """Three validators (300, 200, 200) and three miners, in round 0's scoring phase."""
    w = make_world(params or Params(), n_miners=3, validator_stakes=(300 * TOKEN, 200 * TOKEN, 200 * TOKEN))
    w.to_scoring(0)
    return w


def test_a_second_filer_of_the_same_evidence_joins_the_open_report():
    """Two validators find the same fault in the same segment: the second filing is a confirming
    vote on the first report (no second report for voters to re-check, no second bond), and the
    report confirms with both."""
    w = scoring_three()
    d, p = w.d, w.stack.params
    v0, v1, v2 = w.validators
    m = w.miners[0]
    rid = report(w, m, v0)
    before = w.t.balanceOf(v1)
    joined = report(w, m, v1)
    (vote,) = [e for e in last_logs(d) if type(e).__name__ == "FraudVoted"]
    assert joined == rid and d.report_count() == 1
    assert w.t.balanceOf(v1) == before and d.total_bonds() == 2 * p.report_bond  # v0's, for 2 other voters
    assert (vote.report_id, vote.validator, vote.vote, vote.weight) == (rid, v1, VOTE_CONFIRM, 200 * TOKEN)
    r = d.reports(rid)
    assert (r.votes, r.confirm_weight, r.confirms_by_others, r.reporter) == (2, 500 * TOKEN, 1, v0)
    assert d.report_of(0, m, v1) == rid and d.vote_of(rid, v1) == VOTE_CONFIRM
    with boa.reverts("disputes: already voted"):
        d.vote_fraud(rid, VOTE_REJECT, sender=v1)
    d.vote_fraud(rid, VOTE_REJECT, sender=v2)
    assert d.resolve_fraud(rid) == STATUS_CONFIRMED and w.st.open_reports(m) == 0


def test_a_report_of_another_segment_or_kind_is_its_own_so_no_bogus_report_shields_the_accused():
    """A colluder files first, naming a segment that replays fine: the honest validator's report
    of the failing segment is a report of its own, judged on its own evidence."""
    w = scoring_three()
    d = w.d
    honest, colluder, _ = w.validators
    m = w.miners[0]
    bogus = d.report_fraud(0, m, KIND_REPLAY, 0, EVIDENCE, SIG, sender=colluder)
    real = d.report_fraud(0, m, KIND_REPLAY, 3, EVIDENCE, SIG, sender=honest)
    other_kind = d.report_fraud(0, w.miners[1], KIND_UNAVAILABLE, 3, EVIDENCE, SIG, sender=colluder)
    assert len({bogus, real, other_kind}) == 3 == d.report_count()
    assert d.reports(real).reporter == honest and d.reports(real).votes == 1


def test_once_the_report_resolved_the_same_evidence_files_a_new_report():
    w = scoring_three()
    d = w.d
    v0, v1, v2 = w.validators
    m = w.miners[0]
    first = d.report_fraud(0, m, KIND_UNAVAILABLE, 3, EVIDENCE, SIG, sender=v0)
    d.vote_fraud(first, VOTE_SERVED, sender=v1)
    d.vote_fraud(first, VOTE_SERVED, sender=v2)
    assert d.resolve_fraud(first) == STATUS_VOID
    second = d.report_fraud(0, m, KIND_UNAVAILABLE, 3, EVIDENCE, SIG, sender=v1)
    assert second == first + 1 and d.reports(second).reporter == v1


def test_a_filer_cannot_join_a_report_past_its_window():
    w = scoring_three(Params(challenge_window=30))
    v0, v1, _ = w.validators
    m = w.miners[0]
    report(w, m, v0)
    boa.env.time_travel(seconds=w.stack.params.challenge_window)
    with boa.reverts("disputes: the report to join is past its window"):
        report(w, m, v1)


def test_report_reverts():
    w = make_world(Params(max_permits=2), n_miners=3, validator_stakes=(300 * TOKEN, 200 * TOKEN, 250 * TOKEN))
    d = w.d
    v0, v2, v1 = w.validators  # the third evicted the smallest: v2 holds no permit
    assert list(w.s.validators_of(0)) == [v0, v1]
    m0, m1, m2 = w.miners
    w.commit_all(0, [m0])
    with boa.reverts("disputes: reporting closed"):  # commit phase still open
        report(w, m0, v0)
    w.to_scoring(0, [m1])
    for kind in (0, 7):  # 1-6: replay, derivation, unavailable, lazy_validator, wrong_score, aggregate
        with boa.reverts("disputes: unknown kind"):
            report(w, m0, v0, kind=kind)
    for who in (v2, m1, boa.env.generate_address()):
        with boa.reverts("disputes: not a permitted validator"):
            report(w, m0, who)
    with boa.reverts("disputes: miner did not commit"):
        report(w, m2, v0)
    with boa.reverts("disputes: not a permitted validator"):
        report(w, m0, v0, rnd=1)  # no such round yet
    with boa.reverts("disputes: challenge signature must be 64 bytes"):
        d.report_fraud(0, m0, KIND_REPLAY, 3, EVIDENCE, SIG[:63], sender=v0)
    w.t.approve(d.address, 0, sender=v0)
    with boa.reverts("erc20: insufficient allowance"):
        report(w, m0, v0)
    w.t.approve(d.address, 2**256 - 1, sender=v0)
    report(w, m0, v0, kind=KIND_DERIVATION)
    with boa.reverts("disputes: already reported"):  # once per (round, miner, reporter)
        report(w, m0, v0)
    report(w, m0, v1)  # another reporter may report the same miner
    boa.env.time_travel(seconds=180)  # the audit deadline (reports stay open until it)
    with boa.reverts("disputes: reporting closed"):
        report(w, m1, v1)


def test_report_closed_after_the_result(world: World):
    v0, v1 = world.validators
    world.run_round(0, {v0: [1, 2, 3], v1: [1, 2, 3]}, finalize=False)
    assert world.s.deadlines(0)[2] > boa.env.timestamp  # reveal closed early; deadline not reached
    assert world.s.audit_closed(0) and not world.s.reporting_open(0)  # the audit closed early too
    with boa.reverts("disputes: reporting closed"):
        report(world, world.miners[0], v0)


# -- vote -----------------------------------------------------------------------------------------


def test_vote_reverts_and_tally():
    w = make_world(validator_stakes=(300 * TOKEN, 200 * TOKEN, 250 * TOKEN))
    d = w.d
    v0, v1, v2 = w.validators
    w.to_scoring(0)
    for rid in (0, 1):
        with boa.reverts("disputes: report not open"):
            d.vote_fraud(rid, VOTE_CONFIRM, sender=v1)
    rid = report(w, w.miners[0], v0)
    for vote in (0, 4):
        with boa.reverts("disputes: unknown vote"):
            d.vote_fraud(rid, vote, sender=v1)
    for who in (w.miners[1], join(w.stack, 2, 1000 * TOKEN)):  # a validator with no permit in round 0
        with boa.reverts("disputes: not a permitted validator"):
            d.vote_fraud(rid, VOTE_REJECT, sender=who)
    with boa.reverts("disputes: already voted"):  # the report is the reporter's vote
        d.vote_fraud(rid, VOTE_REJECT, sender=v0)
    d.vote_fraud(rid, VOTE_REJECT, sender=v1)
    (ev,) = last_logs(d, "FraudVoted")
    assert (ev.report_id, ev.validator, ev.vote, ev.weight) == (rid, v1, VOTE_REJECT, 200 * TOKEN)
    with boa.reverts("disputes: already voted"):
        d.vote_fraud(rid, VOTE_CONFIRM, sender=v1)
    r = d.reports(rid)
    assert (r.confirm_weight, r.reject_weight, r.served_weight, r.votes, r.rejects_by_others) == (
        300 * TOKEN, 200 * TOKEN, 0, 2, 1)
    boa.env.time_travel(seconds=w.stack.params.challenge_window)
    with boa.reverts("disputes: challenge window closed"):
        d.vote_fraud(rid, VOTE_SERVED, sender=v2)


def test_resolve_reverts_and_early_resolution_when_everyone_voted(world: World):
    d = world.d
    v0, v1 = world.validators
    world.to_scoring(0)
    with boa.reverts("disputes: report not open"):
        d.resolve_fraud(1)
    rid = report(world, world.miners[0], v0)
    boa.env.time_travel(seconds=world.stack.params.challenge_window - 1)
    with boa.reverts("disputes: challenge window open"):
        d.resolve_fraud(rid)
    rid2 = report(world, world.miners[1], v0)
    d.vote_fraud(rid2, VOTE_CONFIRM, sender=v1)
    assert d.resolve_fraud(rid2) == STATUS_CONFIRMED  # both permitted validators voted
    with boa.reverts("disputes: report not open"):
        d.resolve_fraud(rid2)
    with boa.reverts("disputes: report not open"):
        d.vote_fraud(rid2, VOTE_CONFIRM, sender=v1)


# -- outcomes with two validators -----------------------------------------------------------------


def test_two_validators_report_plus_confirm_slashes(world: World):
    d, st, t, p = world.d, world.st, world.t, world.stack.params
    v0, v1 = world.validators
    m = world.miners[0]
    world.st.stake(60 * TOKEN, sender=m)  # 160 staked
    world.to_scoring(0)
    rid = report(world, m, v1)  # the smaller validator reports
    d.vote_fraud(rid, VOTE_CONFIRM, sender=v0)
    supply, rep_before = t.totalSupply(), t.balanceOf(v1)
    assert d.resolve_fraud(rid, sender=boa.env.generate_address()) == STATUS_CONFIRMED
    (ev,) = last_logs(d, "FraudResolved")
    slashed = 160 * TOKEN * p.slash_bps // BPS
    share = slashed * p.reporter_share_bps // BPS
    assert (ev.report_id, ev.round, ev.miner, ev.status, ev.slashed, ev.bond_burned) == (
        rid, 0, m, STATUS_CONFIRMED, slashed, 0)
    assert d.reports(rid).status == STATUS_CONFIRMED
    assert st.staked(m) == 160 * TOKEN - slashed
    assert t.balanceOf(v1) == rep_before + share + p.report_bond
    assert t.totalSupply() == supply - (slashed - share)
    assert d.total_bonds() == 0 == t.balanceOf(d.address)
    assert st.open_reports(m) == 0 and world.s.open_reports(0, m) == 0
    # 80 left < 100 minimum: no longer eligible, cannot commit next round
    assert not st.is_eligible_miner(m)


@pytest.mark.parametrize("reporter_index", [0, 1])
def test_two_validators_reporter_alone_is_void_and_loses_nothing(world: World, reporter_index):
    _d, t = world.d, world.t
    reporter = world.validators[reporter_index]  # 300 (quorum alone) or 200 (no quorum)
    m = world.miners[0]
    world.to_scoring(0)
    before = t.balanceOf(reporter)
    rid = report(world, m, reporter)
    assert resolve_after_window(world, rid) == STATUS_VOID
    assert t.balanceOf(reporter) == before
    assert world.st.staked(m) == 100 * TOKEN
    assert t.totalSupply() == world.stack.genesis


def test_reject_by_another_burns_the_bond(world: World):
    d, t, p = world.d, world.t, world.stack.params
    v0, v1 = world.validators
    world.to_scoring(0)
    before = t.balanceOf(v0)
    rid = report(world, world.miners[0], v0)
    d.vote_fraud(rid, VOTE_REJECT, sender=v1)
    assert d.resolve_fraud(rid) == STATUS_REJECTED
    (ev,) = last_logs(d, "FraudResolved")
    assert (ev.status, ev.slashed, ev.bond_burned) == (STATUS_REJECTED, 0, p.report_bond)
    assert t.balanceOf(v0) == before - p.report_bond
    assert t.totalSupply() == world.stack.genesis - p.report_bond
    assert world.st.staked(world.miners[0]) == 100 * TOKEN and d.total_bonds() == 0


# -- quorum, thresholds and served ----------------------------------------------------------------


def _outcome(stakes, votes) -> int:
    """votes[i] is validator i's vote (None: abstains); validator 0 reports."""
    w = make_world(n_miners=2, validator_stakes=tuple(s * TOKEN for s in stakes))
    w.to_scoring(0)
    rid = report(w, w.miners[0], w.validators[0])
    for v, vote in zip(w.validators[1:], votes[1:], strict=True):
        if vote is not None:
            w.d.vote_fraud(rid, vote, sender=v)
    boa.env.time_travel(seconds=w.stack.params.challenge_window)
    return w.d.resolve_fraud(rid)


C, R, S, N = VOTE_CONFIRM, VOTE_REJECT, VOTE_SERVED, None


@pytest.mark.parametrize(("stakes", "votes", "expected"), [
    ((200, 200, 200, 200), (C, C, N, N), STATUS_VOID),        # 400 of 800 voted: no quorum
    ((200, 200, 200, 200), (C, C, C, N), STATUS_CONFIRMED),   # 600 of 800, all confirm
    ((200, 200, 200, 200), (C, R, N, N), STATUS_VOID),        # a reject without quorum is void
    ((200, 200, 200), (C, C, R), STATUS_CONFIRMED),           # 2 of 3: one colluder's reject cannot block
    ((200, 200, 200, 200), (C, C, R, R), STATUS_REJECTED),    # exactly half confirming is not a majority
    ((300, 200, 200), (C, C, R), STATUS_CONFIRMED),           # 500/700
    ((200, 300, 200), (C, S, N), STATUS_VOID),                # served outweighs confirm
    ((200, 300, 200), (C, S, R), STATUS_REJECTED),            # served 300 < confirm + reject 400
    ((200, 500, 200), (C, S, R), STATUS_VOID),                # served 500 > 400
    ((200, 200, 300), (C, C, S), STATUS_CONFIRMED),           # 400/700 > 1/2
    ((200, 200, 400), (C, C, S), STATUS_VOID),                # 400/800 is not > 1/2, served wins none, no reject
    ((400, 200, 200), (C, N, N), STATUS_VOID),                # quorum, but nobody else voted
])


def test_outcome_rules(stakes, votes, expected):
    assert _outcome(stakes, votes) == expected


# -- reports and the result ------------------------------------------------------------------------


def _round_with_report(w: World):
    """Scores all three miners, reports miner 0 by v0 during scoring, reveals and finishes the
    audits; returns the report id."""
    v0, v1 = w.validators
    w.to_scoring(0)
    rid = report(w, w.miners[0], v0)
    for v in (v0, v1):
        w.commit_scores(0, v, [1000] * 3)
    for v in (v0, v1):
        w.reveal(0, v)
    w.finish_audits(0)
    return rid


@pytest.mark.parametrize("second_vote", [VOTE_REJECT, None])
def test_the_result_waits_for_a_failed_report_then_pays_normally(world: World, second_vote):
    s, d = world.s, world.d
    m = world.miners[0]
    rid = _round_with_report(world)
    assert d.open_in_round(0) == 1
    with boa.reverts("results: report open"):
        world.post(0)
    if second_vote is not None:
        d.vote_fraud(rid, second_vote, sender=world.validators[1])
    status = resolve_after_window(world, rid)
    assert status == (STATUS_REJECTED if second_vote else STATUS_VOID)
    assert d.open_in_round(0) == 0 and not s.forfeited(0, m)
    world.finalize(world.post(0))
    reward = 700 * TOKEN // 3
    assert world.settled[0].result.pay == (reward,) * 3
    assert world.claim(m, 0) == reward


def test_report_confirmed_before_the_result_forfeits_without_minting(world: World):
    s, d = world.s, world.d
    m = world.miners[0]
    rid = _round_with_report(world)
    d.vote_fraud(rid, VOTE_CONFIRM, sender=world.validators[1])
    d.resolve_fraud(rid)  # every permitted validator voted
    assert s.forfeited(0, m)
    assert [(e.round, e.account) for e in last_logs(d, "RewardForfeited")] == [(0, m)]
    world.finalize(world.post(0))
    result = world.settled[0].result
    col = world.columns(0).index(m)
    assert result.consensus[col] == 0 and result.pay[col] == 0  # a confirmed cheat counts as consensus 0
    reward = 700 * TOKEN // 2  # the two honest miners share the pool
    assert sorted(result.pay) == [0, reward, reward]
    assert s.total_minted() == world.settled[0].header.minted == 2 * reward + sum(result.validator_cumulative)
    with boa.reverts("settlement: nothing to claim"):  # its leaf holds 0
        world.claim(m, 0)


def test_validator_rewards_paid_after_the_report_resolves(world: World):
    rid = _round_with_report(world)
    resolve_after_window(world, rid)
    world.finalize(world.post(0))
    for v in world.validators:
        assert world.claim(v, 0) > 0


# -- withdraw and eligibility ---------------------------------------------------------------------


def test_withdraw_blocked_until_report_resolves(world: World):
    st, d, p = world.st, world.d, world.stack.params
    m = world.miners[0]
    world.to_scoring(0)
    st.request_unbond(100 * TOKEN, sender=m)  # queued stake stays slashable
    rid = report(world, m, world.validators[0])
    d.vote_fraud(rid, VOTE_CONFIRM, sender=world.validators[1])
    boa.env.time_travel(seconds=p.unbonding_delay)
    with boa.reverts("staking: report pending"):
        st.withdraw(sender=m)
    d.resolve_fraud(rid)
    assert st.unbonding(m) == 50 * TOKEN and st.staked(m) == 0
    before = world.t.balanceOf(m)
    st.withdraw(sender=m)
    assert world.t.balanceOf(m) == before + 50 * TOKEN


def test_slashed_miner_cannot_commit_next_round(world: World):
    s, d = world.s, world.d
    v0, v1 = world.validators
    m = world.miners[0]
    world.to_scoring(0)
    rid = report(world, m, v0)
    d.vote_fraud(rid, VOTE_CONFIRM, sender=v1)
    d.resolve_fraud(rid)
    world.to_result(0)
    world.fall_back(0)
    assert s.current_round() == 1 and s.round_info(1)[2] == 2  # two active miners left
    with boa.reverts("settlement: not an eligible miner"):
        s.commit_update(1, b"\xaa" * 32, b"\xbb" * 32, sender=m)
    world.commit_all(1, world.miners[1:])
    assert s.phase(1) == 2  # the two remaining miners close the phase early


def test_an_unavailable_report_served_late_is_void_and_the_accused_pays_the_late_fee(world: World):
    d, p = world.d, world.stack.params
    reporter = world.validators[1]
    world.to_scoring(0)
    before = world.t.balanceOf(reporter)
    rid = report(world, world.miners[0], reporter, kind=KIND_UNAVAILABLE)  # 200
    d.vote_fraud(rid, VOTE_SERVED, sender=world.validators[0])  # 300 served: only a retry got it
    supply = world.t.totalSupply()
    assert d.resolve_fraud(rid) == STATUS_VOID
    (fined,) = last_logs(d, "Fined")
    assert (fined.account, fined.amount) == (world.miners[0], p.late_serve_fee)
    assert world.st.staked(world.miners[0]) == 100 * TOKEN - p.late_serve_fee
    assert world.t.balanceOf(reporter) == before and world.t.totalSupply() == supply - p.late_serve_fee


def test_a_void_for_want_of_voters_fines_nobody(world: World):
    world.to_scoring(0)
    rid = report(world, world.miners[0], world.validators[1], kind=KIND_UNAVAILABLE)  # 200 of 500
    assert resolve_after_window(world, rid) == STATUS_VOID
    assert world.st.staked(world.miners[0]) == 100 * TOKEN


def test_an_unavailable_report_served_at_the_first_try_is_rejected_and_its_bond_burns(world: World):
    """A false `unavailable` report: the voters fetch the checkpoint at once and reject it, so
    the griefer pays its bond (report_bond per other voter) and the accused pays nothing."""
    d, p = world.d, world.stack.params
    griefer = world.validators[1]
    world.to_scoring(0)
    before = world.t.balanceOf(griefer)
    rid = report(world, world.miners[0], griefer, kind=KIND_UNAVAILABLE)
    d.vote_fraud(rid, VOTE_REJECT, sender=world.validators[0])
    assert d.resolve_fraud(rid) == STATUS_REJECTED
    assert world.t.balanceOf(griefer) == before - p.report_bond
    assert world.st.staked(world.miners[0]) == 100 * TOKEN


def test_the_bond_is_report_bond_per_other_voter():
    w = make_world(n_miners=3, validator_stakes=(300 * TOKEN, 200 * TOKEN, 200 * TOKEN, 200 * TOKEN))
    d, p = w.d, w.stack.params
    w.to_scoring(0)
    before = w.t.balanceOf(w.validators[0])
    report(w, w.miners[0], w.validators[0])
    assert before - w.t.balanceOf(w.validators[0]) == 3 * p.report_bond == d.total_bonds()


def test_miner_role_cannot_report(world: World):
    world.to_scoring(0)
    with boa.reverts("disputes: not a permitted validator"):
        report(world, world.miners[1], world.miners[0])


# -- several reports on one miner and round -------------------------------------------------------


def _two_reports(w: World):
    """v0 and v1 both report miner 0 during scoring; returns (miner, v0's id, v1's id, ordered)."""
    v0, v1 = w.validators
    m = w.miners[0]
    ordered = w.to_scoring(0)
    rid0, rid1 = report(w, m, v0), report(w, m, v1, kind=KIND_UNAVAILABLE)
    assert (w.d.report_of(0, m, v0), w.d.report_of(0, m, v1)) == (rid0, rid1)
    assert w.st.open_reports(m) == 2 == w.s.open_reports(0, m)
    return m, rid0, rid1, ordered


def _score_and_reveal(w: World) -> None:
    for v in w.validators:
        w.commit_scores(0, v, [1000] * 3)
    for v in w.validators:
        w.reveal(0, v)
    w.finish_audits(0)


def test_second_confirmed_report_does_not_slash_again(world: World):
    d, s, st, t, p = world.d, world.s, world.st, world.t, world.stack.params
    v0, v1 = world.validators
    m, rid0, rid1, ordered = _two_reports(world)
    d.vote_fraud(rid0, VOTE_CONFIRM, sender=v1)
    d.vote_fraud(rid1, VOTE_CONFIRM, sender=v0)
    assert d.resolve_fraud(rid0) == STATUS_CONFIRMED
    slashed = 100 * TOKEN * p.slash_bps // BPS
    assert st.staked(m) == 100 * TOKEN - slashed and d.slashed_in_round(0, m)
    supply, bal1 = t.totalSupply(), t.balanceOf(v1)
    assert d.resolve_fraud(rid1) == STATUS_CONFIRMED
    (ev,) = last_logs(d, "FraudResolved")
    assert (ev.report_id, ev.status, ev.slashed, ev.bond_burned) == (rid1, STATUS_CONFIRMED, 0, 0)
    assert last_logs(d, "Slashed") == [] and last_logs(d, "RewardForfeited") == []  # forfeited once, by the first
    assert st.staked(m) == 100 * TOKEN - slashed and st.total_slashed() == slashed
    assert t.balanceOf(v1) == bal1 + p.report_bond and t.totalSupply() == supply  # bond back, nothing burned
    assert st.open_reports(m) == 0 == s.open_reports(0, m) and d.total_bonds() == 0
    _score_and_reveal(world)
    assert s.forfeited(0, m)
    assert world.settle(0).result.pay[world.columns(0).index(m)] == 0


def test_the_result_waits_until_every_report_of_the_round_resolves(world: World):
    d, s = world.d, world.s
    v0, v1 = world.validators
    m, rid0, rid1, ordered = _two_reports(world)
    _score_and_reveal(world)
    assert s.phase(0) == 5 and d.open_in_round(0) == 2
    d.vote_fraud(rid1, VOTE_CONFIRM, sender=v0)
    d.resolve_fraud(rid1)
    with boa.reverts("results: report open"):  # v0's report is still open
        world.post(0)
    d.vote_fraud(rid0, VOTE_CONFIRM, sender=v1)
    assert d.resolve_fraud(rid0) == STATUS_CONFIRMED and d.open_in_round(0) == 0
    assert last_logs(d, "Slashed") == []  # slashed once, by the first
    world.finalize(world.post(0))
    assert world.settled[0].result.pay[world.columns(0).index(m)] == 0 and s.forfeited(0, m)


def test_a_void_report_never_clears_another(world: World):
    d, s, st = world.d, world.s, world.st
    v0, v1 = world.validators
    m, rid0, rid1, ordered = _two_reports(world)
    d.vote_fraud(rid1, VOTE_SERVED, sender=v0)
    assert d.resolve_fraud(rid1) == STATUS_VOID
    late = world.stack.params.late_serve_fee  # the voters were served only late
    assert st.staked(m) == 100 * TOKEN - late and st.open_reports(m) == 1 and d.open_in_round(0) == 1
    _score_and_reveal(world)
    with boa.reverts("results: report open"):
        world.post(0)
    d.vote_fraud(rid0, VOTE_CONFIRM, sender=v1)
    assert d.resolve_fraud(rid0) == STATUS_CONFIRMED
    assert st.staked(m) == (100 * TOKEN - late) // 2 and d.slashed_in_round(0, m) and s.forfeited(0, m)
    assert world.settle(0).result.consensus[world.columns(0).index(m)] == 0


def test_only_disputes_fines_and_a_fine_takes_at_most_the_stake(world: World):
    m = world.miners[0]
    with boa.reverts("staking: only disputes"):
        world.st.fine(m, 1, sender=world.validators[0])
    taken = world.st.fine(m, 10**6 * TOKEN, sender=world.d.address)
    assert taken == 100 * TOKEN and world.st.staked(m) == 0 and not world.st.is_eligible_miner(m)
