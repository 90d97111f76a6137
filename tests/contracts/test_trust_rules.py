"""Issue 13 rules 2-5: strict-majority consensus with a reveal quorum and a fallback, agreement
settled after reports (a confirmed cheat counts as 0), the audit phase, and `lazy_validator`
reports. Each rule has an attack test and an honest test.

Since issue 14 the values are computed off chain (`build_result`) from the round's chain facts
(snapshot weights, who revealed what, forfeits), which these tests put on chain; Results then
certifies them (test_results) and ColumnChallenges recomputes any one of them."""

import boa
import pytest
from conftest import (
    BPS,
    GENESIS_MODEL,
    KIND_LAZY,
    KIND_REPLAY,
    PHASE_AUDIT,
    PHASE_RESULT,
    PHASE_REVEAL,
    SIG,
    STATUS_CONFIRMED,
    STATUS_REJECTED,
    TOKEN,
    VOTE_CONFIRM,
    VOTE_REJECT,
    World,
    last_logs,
    make_world,
)
from eth_utils import keccak

EVIDENCE = b"\x0e" * 32
HIGH, FAIR = 60000, 30000


def reveal_round(w: World, scores: dict, revealers=None) -> list:
    """Commit (all miners), score (every validator in `scores`), reveal (`revealers`, default all),
    and leave the round in its audit phase; returns the ordered miners."""
    ordered = w.to_scoring(0)
    for v, sc in scores.items():
        w.commit_scores(0, v, sc)
    if w.s.phase(0) != PHASE_REVEAL:
        boa.env.time_travel(seconds=w.stack.params.score_duration)
    for v in scores if revealers is None else revealers:
        w.reveal(0, v)
    if w.s.phase(0) == PHASE_REVEAL:
        boa.env.time_travel(seconds=w.stack.params.reveal_duration)
    return ordered


def finalize(w: World):
    """Closes the audit and returns the round's result as computed from its chain facts."""
    w.finish_audits(0)
    return w.settle(0)


def pay_of(settled, account) -> int:
    """What `account` earned in the settled round (its claim leaf's cumulative, no earlier rounds)."""
    return settled.entry_of(str(account)).cumulative


def consensus(w: World, ordered=None) -> list:
    return list(w.settle(0).result.consensus)


# -- rule 5: strict majority ------------------------------------------------------------------


def test_exactly_half_of_the_revealed_stake_cannot_raise_a_score():
    w = make_world(validator_stakes=(200 * TOKEN, 200 * TOKEN))
    v0, v1 = w.validators
    ordered = w.run_round(0, {v0: [HIGH] * 3, v1: [FAIR, 0, FAIR]}, finalize=False)
    assert consensus(w, ordered) == [FAIR, 0, FAIR]  # half the stake behind HIGH is not a majority
    assert w.settle(0).result.quorum


def test_a_strict_majority_sets_the_score():
    w = make_world(validator_stakes=(200 * TOKEN, 200 * TOKEN, 200 * TOKEN))
    v0, v1, v2 = w.validators
    ordered = w.run_round(0, {v0: [HIGH] * 3, v1: [HIGH] * 3, v2: [0] * 3}, finalize=False)
    assert consensus(w, ordered) == [HIGH] * 3


@pytest.mark.parametrize("honest_revealers", [2, 1])
def test_a_coalition_below_a_third_of_the_permitted_stake_never_raises_a_score(honest_revealers):
    """330 of 1000 permitted: a score needs the support of more than half the permitted stake, so
    the coalition raises nothing whether every honest validator reveals or one of them is absent.
    With both honest ones present it lowers nothing either; with one absent (340 honest of 670
    revealed) it can withhold its support: no rule tells the honest third from a lying one."""
    w = make_world(validator_stakes=(330 * TOKEN, 340 * TOKEN, 330 * TOKEN))
    bad, h0, h1 = w.validators
    honest = {h0: [FAIR, FAIR, 1000], h1: [FAIR, FAIR, 1000]}
    scores = {bad: [65535, 0, 65535], **honest}
    ordered = reveal_round(w, scores, [bad, h0, h1][: 1 + honest_revealers])
    finalize(w)
    assert w.settle(0).result.quorum
    expected = [FAIR, FAIR, 1000] if honest_revealers == 2 else [FAIR, 0, 1000]
    assert consensus(w, ordered) == expected


def test_a_pair_holding_half_the_permitted_stake_cannot_raise_a_score_while_an_honest_one_is_absent():
    """The attack of the issue: two validators holding half of the stake, one honest validator
    offline. Counted against the revealed stake they were a majority and set any score; counted
    against the permitted stake, half is not a majority."""
    w = make_world(validator_stakes=(250 * TOKEN, 250 * TOKEN, 250 * TOKEN, 250 * TOKEN))
    b0, b1, honest, _absent = w.validators
    ordered = reveal_round(w, {b0: [65535] * 3, b1: [65535] * 3, honest: [FAIR, 1000, 0]}, [b0, b1, honest])
    finalize(w)
    assert w.settle(0).result.quorum and consensus(w, ordered) == [FAIR, 1000, 0]


def test_a_coalition_below_a_third_that_withholds_cannot_force_the_fallback():
    w = make_world(validator_stakes=(330 * TOKEN, 340 * TOKEN, 330 * TOKEN))
    bad, h0, h1 = w.validators
    ordered = reveal_round(w, {bad: [0] * 3, h0: [FAIR] * 3, h1: [FAIR] * 3}, [h0, h1])
    settled = finalize(w)
    assert settled.result.quorum and consensus(w, ordered) == [FAIR] * 3
    assert all(p > 0 for p in settled.result.pay) and pay_of(settled, bad) == 0


def test_a_coalition_below_half_cannot_raise_a_score_when_the_others_reveal():
    w = make_world(validator_stakes=(490 * TOKEN, 510 * TOKEN))
    bad, honest = w.validators
    ordered = w.run_round(0, {bad: [65535] * 3, honest: [FAIR, 1000, 0]}, finalize=False)
    assert consensus(w, ordered) == [FAIR, 1000, 0]


def test_a_stake_majority_that_reveals_sets_the_score():
    w = make_world(validator_stakes=(510 * TOKEN, 490 * TOKEN))
    v0, v1 = w.validators
    ordered = w.run_round(0, {v0: [HIGH, 1000, 0], v1: [0, 0, 0]}, finalize=False)
    assert consensus(w, ordered) == [HIGH, 1000, 0]


# -- rule 5: reveal quorum and fallback ---------------------------------------------------------


def test_without_the_quorum_the_round_falls_back_and_honest_validators_are_still_paid():
    w = make_world(validator_stakes=(400 * TOKEN, 300 * TOKEN, 300 * TOKEN))
    v0, v1, v2 = w.validators
    ordered = reveal_round(w, {v0: [HIGH] * 3, v1: [HIGH] * 3, v2: [FAIR] * 3}, [v1, v2])  # 600 of 1000
    settled = finalize(w)
    assert not settled.result.quorum and settled.header.model_hash == GENESIS_MODEL  # the model stays
    assert consensus(w, ordered) == [0, 0, 0]
    assert settled.result.pay == (0, 0, 0) and settled.result.reputation == (0, 0, 0)  # no miner emission
    pool = 300 * TOKEN  # the validators' pool, by stake alone
    assert pay_of(settled, v1) == pay_of(settled, v2) == pool // 2 and pay_of(settled, v0) == 0
    assert settled.header.minted == pool


def test_exactly_two_thirds_revealed_is_a_quorum():
    """Two of three equal validators settle a round without the third, which earns nothing."""
    w = make_world(validator_stakes=(200 * TOKEN, 200 * TOKEN, 200 * TOKEN))
    v0, v1, absent = w.validators
    ordered = reveal_round(w, {v0: [HIGH] * 3, v1: [HIGH] * 3})
    settled = finalize(w)
    assert settled.result.quorum and consensus(w, ordered) == [HIGH] * 3
    assert all(p > 0 for p in settled.result.pay)
    assert pay_of(settled, v0) > 0 and pay_of(settled, v1) > 0 and pay_of(settled, absent) == 0


def test_under_two_thirds_revealed_is_not_a_quorum():
    w = make_world(validator_stakes=(201 * TOKEN, 200 * TOKEN, 200 * TOKEN))
    _, v1, v2 = w.validators
    ordered = reveal_round(w, {v1: [HIGH] * 3, v2: [HIGH] * 3})  # 400 of 601
    settled = finalize(w)
    assert not settled.result.quorum and consensus(w, ordered) == [0, 0, 0]


def test_more_than_two_thirds_revealed_settles_normally():
    w = make_world(validator_stakes=(201 * TOKEN, 200 * TOKEN, 200 * TOKEN))
    v0, v1, _ = w.validators
    ordered = reveal_round(w, {v0: [HIGH] * 3, v1: [HIGH] * 3})  # 401 of 601
    settled = finalize(w)
    assert settled.result.quorum and consensus(w, ordered) == [HIGH] * 3
    assert settled.result.pay == (700 * TOKEN // 3,) * 3


# -- rule 4: agreement is settled after reports resolve -------------------------------------------


def _cheat_round(confirm: bool):
    """Catcher v0 (200) scores cheat m0 at 0 and reports it; v1 (200) scores it high and rejects;
    v2 (300) scored it high too, then replays and confirms (or rejects)."""
    w = make_world(validator_stakes=(200 * TOKEN, 200 * TOKEN, 300 * TOKEN))
    catcher, high, late = w.validators
    ordered = w.to_scoring(0)
    cheat = ordered[0]
    rid = w.d.report_fraud(0, cheat, KIND_REPLAY, 3, EVIDENCE, SIG, sender=catcher)
    scores = {catcher: [0, FAIR, FAIR], high: [HIGH, FAIR, FAIR], late: [HIGH, FAIR, FAIR]}
    for v, sc in scores.items():
        w.commit_scores(0, v, sc)
    for v in scores:
        w.reveal(0, v)
    w.d.vote_fraud(rid, VOTE_REJECT, sender=high)
    w.d.vote_fraud(rid, VOTE_CONFIRM if confirm else VOTE_REJECT, sender=late)
    status = w.d.resolve_fraud(rid)
    return w, ordered, status, finalize(w)


def test_catching_a_confirmed_cheat_pays_more_than_scoring_it_high():
    w, ordered, status, settled = _cheat_round(confirm=True)
    catcher, high, _ = w.validators
    assert status == STATUS_CONFIRMED and w.s.forfeited(0, ordered[0])
    assert consensus(w, ordered) == [0, FAIR, FAIR]  # the cheat counts as 0
    credits = dict(zip(settled.inputs.validators, settled.result.credits[0], strict=True))  # the cheat's column
    assert credits[str(catcher)] > 0 and credits[str(high)] == credits[str(w.validators[2])] == 0
    assert pay_of(settled, catcher) > pay_of(settled, high)  # equal stakes: strictly more
    assert settled.result.pay[0] == 0


def test_without_a_confirmed_report_the_median_stands():
    w, ordered, status, settled = _cheat_round(confirm=False)
    catcher, high, _ = w.validators
    assert status == STATUS_REJECTED and not w.s.forfeited(0, ordered[0])
    assert consensus(w, ordered) == [HIGH, FAIR, FAIR]
    assert pay_of(settled, catcher) < pay_of(settled, high)


# -- rule 3: the audit phase ----------------------------------------------------------------------


def test_audit_phase_closes_early_once_every_revealed_validator_is_done(world: World):
    s = world.s
    v0, v1 = world.validators
    reveal_round(world, {v0: [1, 2, 3], v1: [1, 2, 3]})
    assert s.phase(0) == PHASE_AUDIT and s.reporting_open(0)
    with boa.reverts("results: audit phase open"):
        s.post_result(list(world.settle(0).header.words()), b"\x01" * 256, [], [])
    s.audits_done(0, sender=v0)
    (ev,) = last_logs(s, "AuditsDone")
    assert (ev.round, ev.validator) == (0, v0) and s.audited(0, v0) and not s.audited(0, v1)
    with boa.reverts("settlement: audits already done"):
        s.audits_done(0, sender=v0)
    assert s.phase(0) == PHASE_AUDIT
    s.audits_done(0, sender=v1)
    assert s.phase(0) == PHASE_RESULT and not s.reporting_open(0)
    assert s.deadlines(0)[3] > boa.env.timestamp  # closed before its deadline
    assert s.audit_closed(0)


def test_audit_phase_closes_at_its_deadline_otherwise(world: World):
    s = world.s
    v0, v1 = world.validators
    reveal_round(world, {v0: [1, 2, 3], v1: [1, 2, 3]})
    s.audits_done(0, sender=v0)  # v1 never says it is done
    deadline = s.deadlines(0)[3]
    boa.env.time_travel(seconds=deadline - 1 - boa.env.timestamp)
    assert s.phase(0) == PHASE_AUDIT
    boa.env.time_travel(seconds=1)
    assert s.phase(0) == PHASE_RESULT
    with boa.reverts("settlement: not in audit phase"):
        s.audits_done(0, sender=v1)
    assert s.audit_closed(0)


def test_audits_done_reverts_outside_the_audit_phase_or_without_a_reveal():
    w = make_world(validator_stakes=(300 * TOKEN, 200 * TOKEN, 200 * TOKEN))
    v0, v1, v2 = w.validators
    w.to_scoring(0)
    for v in (v0, v1, v2):
        w.commit_scores(0, v, [5] * 3)
    w.reveal(0, v0)
    with boa.reverts("settlement: not in audit phase"):  # still revealing
        w.s.audits_done(0, sender=v0)
    with boa.reverts("settlement: scores not revealed"):
        w.s.audits_done(0, sender=v2)
    w.reveal(0, v1)
    boa.env.time_travel(seconds=w.stack.params.reveal_duration)  # v2 never reveals
    with boa.reverts("settlement: scores not revealed"):
        w.s.audits_done(0, sender=v2)
    w.s.audits_done(0, sender=v0)
    w.s.audits_done(0, sender=v1)  # every validator that revealed: closed
    assert w.s.phase(0) == PHASE_RESULT


# -- rule 3: lazy_validator reports -------------------------------------------------------------


def _lazy_world():
    """v0 (300), v1 (200), lazy (200) all reveal; the round is in its audit phase."""
    w = make_world(validator_stakes=(300 * TOKEN, 200 * TOKEN, 200 * TOKEN))
    ordered = reveal_round(w, {v: [FAIR] * 3 for v in w.validators})
    return w, ordered


def challenge_sig(accused, index: int) -> bytes:
    """A stand-in for the accused's challenge signature of its audited segment (off-chain in v2)."""
    return keccak(f"sig/{accused}/{index}".encode()) * 2


def report_lazy(w: World, accused, reporter, index: int = 1) -> int:
    return w.d.report_fraud(0, accused, KIND_LAZY, index, EVIDENCE, challenge_sig(accused, index), sender=reporter)


def test_confirmed_lazy_validator_is_slashed_and_unpaid_while_the_others_are_paid():
    w, ordered = _lazy_world()
    v0, v1, lazy = w.validators
    d, st, p = w.d, w.st, w.stack.params
    before = w.t.balanceOf(v0)
    rid = report_lazy(w, lazy, v0)
    (ev,) = last_logs(d, "FraudReported")
    assert (ev.miner, ev.kind, ev.segment, ev.challenge_sig) == (lazy, KIND_LAZY, 1, challenge_sig(lazy, 1))
    rid2 = report_lazy(w, lazy, v1, index=2)  # a second reporter, another audited miner
    assert d.open_in_round(0) == 2 and st.open_reports(lazy) == 2
    with boa.reverts("disputes: accused cannot vote"):
        d.vote_fraud(rid, VOTE_REJECT, sender=lazy)
    w.finish_audits(0)
    with boa.reverts("results: report open"):
        w.s.post_result(list(w.settle(0).header.words()), b"\x01" * 256, [], [])
    d.vote_fraud(rid, VOTE_CONFIRM, sender=v1)
    assert d.resolve_fraud(rid) == STATUS_CONFIRMED  # everyone who may vote voted
    slashed = 200 * TOKEN * p.slash_bps // BPS
    assert st.staked(lazy) == 200 * TOKEN - slashed and d.slashed_in_round(0, lazy) and w.s.forfeited(0, lazy)
    assert w.t.balanceOf(v0) == before + slashed * p.reporter_share_bps // BPS
    d.vote_fraud(rid2, VOTE_CONFIRM, sender=v0)
    assert d.resolve_fraud(rid2) == STATUS_CONFIRMED  # the second confirmed report slashes nothing more
    assert last_logs(d, "Slashed") == [] and st.staked(lazy) == 200 * TOKEN - slashed
    assert d.open_in_round(0) == 0 and st.open_reports(lazy) == 0
    settled = w.settle(0)
    pool = 300 * TOKEN
    assert pay_of(settled, lazy) == 0
    # by stake, lazy left out (per column, so each column's credits round down)
    assert abs(pay_of(settled, v0) - pool * 3 // 5) <= 3 and abs(pay_of(settled, v1) - pool * 2 // 5) <= 3
    assert consensus(w, ordered) == [FAIR] * 3  # its scores are void (forfeited): the other two decide


def test_rejected_lazy_validator_report_burns_the_bond_and_the_validator_is_paid():
    w, _ = _lazy_world()
    v0, v1, accused = w.validators
    rid = report_lazy(w, accused, v1)
    w.d.vote_fraud(rid, VOTE_REJECT, sender=v0)
    assert w.d.resolve_fraud(rid) == STATUS_REJECTED
    assert w.st.staked(accused) == 200 * TOKEN and not w.s.forfeited(0, accused)
    settled = finalize(w)
    assert abs(pay_of(settled, accused) - 300 * TOKEN * 2 // 7) <= 3


def test_lazy_validator_report_reverts():
    w = make_world(validator_stakes=(300 * TOKEN, 200 * TOKEN, 200 * TOKEN))
    v0, v1, silent = w.validators
    ordered = w.to_scoring(0)
    for v in w.validators:
        w.commit_scores(0, v, [FAIR] * 3)
    w.reveal(0, v0)
    w.reveal(0, v1)
    with boa.reverts("disputes: cannot report self"):
        report_lazy(w, v0, v0)
    with boa.reverts("disputes: accused did not reveal"):
        w.d.report_fraud(0, silent, KIND_LAZY, 0, EVIDENCE, SIG, sender=v0)
    with boa.reverts("disputes: accused did not reveal"):  # a miner is not a validator
        w.d.report_fraud(0, ordered[0], KIND_LAZY, 0, EVIDENCE, SIG, sender=v0)
    with boa.reverts("disputes: miner index out of range"):
        w.d.report_fraud(0, v1, KIND_LAZY, 3, EVIDENCE, SIG, sender=v0)
    with boa.reverts("disputes: not a permitted validator"):
        report_lazy(w, v1, ordered[0])
    report_lazy(w, v1, v0, index=2)  # the last index is in range
    with boa.reverts("disputes: already reported"):
        report_lazy(w, v1, v0, index=0)
    boa.env.time_travel(seconds=w.s.deadlines(0)[3] - boa.env.timestamp)  # the audit deadline
    with boa.reverts("disputes: reporting closed"):
        report_lazy(w, v0, v1)


def test_lazy_validator_in_a_fallback_round_gets_no_pay():
    w = make_world(validator_stakes=(400 * TOKEN, 300 * TOKEN, 300 * TOKEN))
    v0, v1, lazy = w.validators
    reveal_round(w, {v0: [FAIR] * 3, v1: [FAIR] * 3, lazy: [FAIR] * 3}, [v1, lazy])  # 600 of 1000
    rid = report_lazy(w, lazy, v1)
    w.d.vote_fraud(rid, VOTE_CONFIRM, sender=v0)  # permitted, though it did not reveal
    assert w.d.resolve_fraud(rid) == STATUS_CONFIRMED
    settled = finalize(w)
    assert not settled.result.quorum
    assert pay_of(settled, lazy) == 0 and pay_of(settled, v1) == 300 * TOKEN and pay_of(settled, v0) == 0


KIND_WRONG_SCORE = 5


def test_a_wrong_score_report_names_a_revealed_number_and_a_confirmed_one_slashes_the_validator():
    """Kind 5 (`wrong_score`): the accused validator's revealed score of one miner, or (index n)
    its held-out loss; voted by the others like a `lazy_validator` report, and it slashes."""
    w, _ = _lazy_world()
    v0, v1, liar = w.validators
    with boa.reverts("disputes: miner index out of range"):  # past the loss's index
        w.d.report_fraud(0, liar, KIND_WRONG_SCORE, 4, EVIDENCE, SIG, sender=v0)
    with boa.reverts("disputes: miner index out of range"):  # a lazy_validator report has no loss index
        w.d.report_fraud(0, liar, KIND_LAZY, 3, EVIDENCE, SIG, sender=v0)
    with boa.reverts("disputes: unknown kind"):
        w.d.report_fraud(0, liar, 7, 0, EVIDENCE, SIG, sender=v0)
    rid = w.d.report_fraud(0, liar, KIND_WRONG_SCORE, 3, EVIDENCE, SIG, sender=v0)  # its held-out loss
    staked = w.st.staked(liar)
    w.d.vote_fraud(rid, VOTE_CONFIRM, sender=v1)
    assert w.d.resolve_fraud(rid) == STATUS_CONFIRMED
    assert w.st.staked(liar) < staked and w.s.forfeited(0, liar)


def test_a_false_wrong_score_report_burns_the_bond_and_slashes_nobody():
    w, _ = _lazy_world()
    v0, v1, accused = w.validators
    rid = w.d.report_fraud(0, accused, KIND_WRONG_SCORE, 1, EVIDENCE, SIG, sender=v1)
    w.d.vote_fraud(rid, VOTE_REJECT, sender=v0)
    assert w.d.resolve_fraud(rid) == STATUS_REJECTED
    assert w.st.staked(accused) == 200 * TOKEN and not w.s.forfeited(0, accused)
