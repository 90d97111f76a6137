# pragma version ~=0.4.3
# SPDX-License-Identifier: AGPL-3.0-only
"""
@title veritrain fraud reports and slashing
@custom:contract-name disputes
@license GNU Affero General Public License v3.0 only
@notice A permitted validator of a round files a `replay`, `derivation` or
        `unavailable` report against a miner, or a `lazy_validator` report against
        another validator that revealed (its replay witness or challenge signature
        for one miner fails the audit) or a `wrong_score` one (its revealed score
        of one miner, or its held-out loss, is not what it recomputes to), until the round's audit phase is over,
        or an `aggregate` one against a validator that signed a wrong partial sum of the round's
        aggregation tree, in the round's aggregate phase (from the audit deadline for `aggregate_window`
        seconds: the result never waits for it, the slash does not change it), posting a bond (one report per round, accused and reporter). The report is
        the reporter's confirming vote; the round's other validators (never the
        accused) vote `confirm`, `reject` or `served`. After the challenge window
        (or once every validator who may vote did) anyone resolves it; `finalize`
        waits until every report of the round is resolved:
        - confirmed: quorum (> 1/2 of the stake that may vote voted), > 1/2 of voting
          stake confirms (a strict majority: no minority blocks a true report or
          confirms a false one), and someone besides the reporter confirmed -> the accused
          is slashed and its reward for the round forfeited (slashed once per round:
          a later confirmed report on the same accused and round slashes nothing);
        - rejected: not confirmed and a validator besides the reporter rejected -> the bond is burned;
        - void: anything else (no quorum, only the reporter voted, `served` outweighs
          the rest) -> the bond is returned.
"""

from ethereum.ercs import IERC20

from . import constants
from .interfaces import IRewards
from .interfaces import IRounds
from .interfaces import IScores
from .interfaces import IStaking
from .interfaces import IToken

SIG_BYTES: constant(uint256) = constants.ED25519_SIG_BYTES
MAX_VALIDATORS: constant(uint256) = constants.MAX_VALIDATORS

KIND_REPLAY: constant(uint8) = 1
KIND_DERIVATION: constant(uint8) = 2
KIND_UNAVAILABLE: constant(uint8) = 3
KIND_LAZY_VALIDATOR: constant(uint8) = 4
KIND_WRONG_SCORE: constant(uint8) = 5
KIND_AGGREGATE: constant(uint8) = 6
VOTE_CONFIRM: constant(uint8) = 1
VOTE_REJECT: constant(uint8) = 2
VOTE_SERVED: constant(uint8) = 3
STATUS_OPEN: constant(uint8) = 1
STATUS_CONFIRMED: constant(uint8) = 2
STATUS_REJECTED: constant(uint8) = 3
STATUS_VOID: constant(uint8) = 4
BPS: constant(uint256) = constants.BPS


struct Report:
    round: uint256
    miner: address
    reporter: address
    kind: uint8
    segment: uint16
    evidence_hash: bytes32
    deadline: uint256
    status: uint8
    confirm_weight: uint256
    reject_weight: uint256
    served_weight: uint256
    votes: uint256
    confirms_by_others: uint256
    rejects_by_others: uint256
    # who decides it, fixed when it is filed: the stake and number of validators that may
    # vote, and whether only those holding the accused miner's hardware class may
    voter_weight: uint256
    voter_count: uint256
    class_bound: bool


token: public(immutable(IERC20))
staking: public(immutable(IStaking))
rounds: public(immutable(IRounds))
rewards: public(immutable(IRewards))
# tokens (wei) a reporter posts per validator other than itself that may vote: every voter re-checks
report_bond: public(immutable(uint256))
# tokens (wei) burned from an accused whose unavailable checkpoint was served only after the report
late_serve_fee: public(immutable(uint256))
# seconds after a round's audit deadline during which `aggregate` reports may be filed
aggregate_window: public(immutable(uint256))
challenge_window: public(immutable(uint256))
slash_bps: public(immutable(uint256))
reporter_share_bps: public(immutable(uint256))
# a validator permitted in this many ended rounds in a row, revealing in none of them while
# others did, loses its eligibility (`retire_absent`); 0: never
absence_rounds: public(immutable(uint256))
MAX_ABSENCE_ROUNDS: constant(uint256) = 16
# reports one validator may file per round: each makes every voter of it re-check
max_reports: public(immutable(uint256))
reports_filed: public(HashMap[uint256, HashMap[address, uint256]])

report_count: public(uint256)
reports: public(HashMap[uint256, Report])
# round -> accused -> reporter -> report id: one report per (round, accused, reporter), so a
# voided report (e.g. a colluder's) never shields the accused from another validator's report
report_of: public(HashMap[uint256, HashMap[address, HashMap[address, uint256]]])
# keccak(round, accused, kind, segment) -> the open report of that evidence: a later filer joins it
# (its filing is a confirming vote), so voters re-check each named segment once
open_report: HashMap[bytes32, uint256]
# round -> accused -> True once a report against it in that round was confirmed (slashed once)
slashed_in_round: public(HashMap[uint256, HashMap[address, bool]])
vote_of: public(HashMap[uint256, HashMap[address, uint8]])
total_bonds: public(uint256)


event FraudReported:
    report_id: indexed(uint256)
    round: indexed(uint256)
    miner: indexed(address)
    reporter: address
    kind: uint8
    segment: uint16
    evidence_hash: bytes32
    challenge_sig: Bytes[SIG_BYTES]
    deadline: uint256

event FraudVoted:
    report_id: indexed(uint256)
    validator: indexed(address)
    vote: uint8
    weight: uint256

event FraudResolved:
    report_id: indexed(uint256)
    round: indexed(uint256)
    miner: indexed(address)
    status: uint8
    slashed: uint256
    bond_burned: uint256


@deploy
def __init__(
    token_: IERC20, staking_: IStaking, rounds_: IRounds, rewards_: IRewards, report_bond_: uint256,
    challenge_window_: uint256, slash_bps_: uint256, reporter_share_bps_: uint256, absence_rounds_: uint256,
    max_reports_: uint256, late_serve_fee_: uint256, aggregate_window_: uint256,
):
    """
    @notice Fixes the dispute parameters. The staking contract's unbonding delay
            must exceed one round's phases (commit, score, reveal, audit) plus the
            challenge window, so a cheater or a lazy validator cannot withdraw
            before a report against it can be filed and resolved.
    @param token_ The bond token.
    @param staking_ The staking registry (slashes, report counts).
    @param rounds_ The round clock (validator snapshots, reporting window, durations).
    @param rewards_ The rewards contract (holds back and forfeits rewards).
    @param report_bond_ Tokens (wei) a reporter posts per other validator that may vote on
           its report (at least one): returned unless the report is rejected.
    @param challenge_window_ Seconds a report stays open for votes.
    @param slash_bps_ Share of the miner's stake slashed on a confirmed report.
    @param reporter_share_bps_ Share of the slash paid to the reporter; the rest is burned.
    @param absence_rounds_ Ended rounds in a row without a reveal that end a validator's eligibility (0: never).
    @param max_reports_ Reports one validator may file per round.
    @param late_serve_fee_ Tokens (wei) burned from the stake of an accused whose report is
           void because the voters were served its checkpoint only late.
    @param aggregate_window_ Seconds after a round's audit deadline that `aggregate` reports
           may be filed (the run's result duration): counted in the unbonding delay.
    """
    assert max_reports_ > 0, "disputes: zero report cap"
    assert slash_bps_ <= BPS and reporter_share_bps_ <= BPS, "disputes: bad fraction"
    assert absence_rounds_ <= MAX_ABSENCE_ROUNDS, "disputes: absence rounds above 16"
    assert challenge_window_ > 0, "disputes: zero challenge window"
    phases: uint256 = staticcall rounds_.commit_duration() + staticcall rounds_.score_duration() + staticcall rounds_.reveal_duration() + staticcall rounds_.audit_duration()
    assert aggregate_window_ > 0, "disputes: zero aggregate window"
    assert staticcall staking_.unbonding_delay() > phases + aggregate_window_ + challenge_window_, "disputes: unbonding delay too short"
    token = token_
    staking = staking_
    rounds = rounds_
    rewards = rewards_
    report_bond = report_bond_
    challenge_window = challenge_window_
    slash_bps = slash_bps_
    reporter_share_bps = reporter_share_bps_
    absence_rounds = absence_rounds_
    max_reports = max_reports_
    late_serve_fee = late_serve_fee_
    aggregate_window = aggregate_window_


@external
def retire_absent(validator: address, witnesses: DynArray[address, MAX_ABSENCE_ROUNDS]):
    """
    @notice Ends the eligibility of `validator` (Staking.retire) when it held a permit in
            each of the last `absence_rounds` ended rounds and revealed in none of them,
            while another validator revealed in each: an absent validator's stake stops
            counting against the others' quorum. Anyone may call it.
    @param validator The absent validator.
    @param witnesses For each of those rounds, newest first, a validator that revealed in it.
    """
    assert absence_rounds > 0, "disputes: absence never retires"
    current: uint256 = staticcall rounds.current_round()
    assert current >= absence_rounds, "disputes: too few rounds"
    assert len(witnesses) == absence_rounds, "disputes: one witness per round"
    scores: IScores = IScores(staticcall rounds.scores())
    for k: uint256 in range(absence_rounds, bound=MAX_ABSENCE_ROUNDS):
        r: uint256 = current - 1 - k
        assert staticcall rounds.validator_weight(r, validator) > 0, "disputes: not permitted in every round"
        assert not staticcall scores.revealed(r, validator), "disputes: revealed in one of the rounds"
        assert staticcall scores.revealed(r, witnesses[k]), "disputes: witness did not reveal"
    extcall staking.retire(validator)


@external
def report_fraud(
    round: uint256, miner: address, kind: uint8, segment: uint16, evidence_hash: bytes32, challenge_sig: Bytes[SIG_BYTES]
) -> uint256:
    """
    @notice Files a report (1 replay, 2 derivation, 3 unavailable against a miner
            that committed; 4 lazy_validator or 5 wrong_score against another
            validator that revealed in `round`) posting the bond (after `approve`). Counts as
            the reporter's confirming vote. One report per (round, accused,
            reporter): other validators may still report an accused whose earlier
            report failed. While a report of the same (round, accused, kind,
            segment) is open, filing joins it instead: a confirming vote, no
            bond, no new report, so its voters re-check that segment once.
    @param round The round of the reported update or reveal.
    @param miner The accused: the miner (kinds 1-3) or the validator (kinds 4, 5).
    @param kind 1 replay, 2 derivation, 3 unavailable, 4 lazy_validator, 5 wrong_score, 6 aggregate.
    @param segment Kinds 1-3: one of the reporter's challenged segments (voters
           check it); kinds 4, 5: the audited miner's index in `miners_of(round)`
           (kind 5: the commit count for the accused's held-out loss); kind 6: the
           node's position in the tree, bottom level first, left to right.
    @param evidence_hash Hash of the off-chain evidence.
    @param challenge_sig Kinds 1-3: the reporter's challenge signature; kinds 4, 5:
           the accused's revealed signature for the audited miner; kind 6: the accused's
           node-key signature of its claim that the node's partial sum hashes to `evidence_hash`.
    @return The report id.
    """
    assert kind >= KIND_REPLAY and kind <= KIND_AGGREGATE, "disputes: unknown kind"
    weight: uint256 = staticcall rounds.validator_weight(round, msg.sender)
    assert weight > 0, "disputes: not a permitted validator"
    voter_weight: uint256 = 0
    voter_count: uint256 = 0
    class_bound: bool = False
    if kind == KIND_AGGREGATE:
        # a tree node's servers are drawn from the validators that revealed (PROTOCOL.md §13.9)
        assert miner != msg.sender, "disputes: cannot report self"
        assert staticcall IScores(staticcall rounds.scores()).revealed(round, miner), "disputes: accused did not reveal"
        assert self._aggregate_open(round), "disputes: aggregate reporting closed"
        voter_weight = staticcall rounds.total_weight(round) - staticcall rounds.validator_weight(round, miner)
        voter_count = staticcall rounds.validator_count(round) - 1
    elif kind == KIND_LAZY_VALIDATOR or kind == KIND_WRONG_SCORE:
        self._check_lazy_accused(round, miner, segment, kind == KIND_WRONG_SCORE)
        # the accused validator may not vote: the quorum counts the others only
        voter_weight = staticcall rounds.total_weight(round) - staticcall rounds.validator_weight(round, miner)
        voter_count = staticcall rounds.validator_count(round) - 1
    else:
        assert staticcall rounds.has_committed(round, miner), "disputes: miner did not commit"
        voter_weight, voter_count, class_bound = self._class_voters(round, miner)
        if class_bound:
            assert self._holds_class(miner, msg.sender), "disputes: reporter does not hold the miner's class"
        else:
            # nobody holds the class with enough stake: replays were tolerance checks, which are
            # no evidence; a derivation fault is the same on every class
            assert kind == KIND_DERIVATION, "disputes: only derivation reports without exact checkers"
    assert kind == KIND_AGGREGATE or staticcall rounds.reporting_open(round), "disputes: reporting closed"
    assert self.report_of[round][miner][msg.sender] == 0, "disputes: already reported"
    key: bytes32 = keccak256(abi_encode(round, miner, kind, segment))
    joined: uint256 = self.open_report[key]
    if joined != 0 and self.reports[joined].status == STATUS_OPEN:
        self._join(joined, weight)
        self.report_of[round][miner][msg.sender] = joined
        return joined
    filed: uint256 = self.reports_filed[round][msg.sender]
    assert filed < max_reports, "disputes: report cap reached"
    self.reports_filed[round][msg.sender] = filed + 1
    assert len(challenge_sig) == SIG_BYTES, "disputes: challenge signature must be 64 bytes"
    bond: uint256 = self._bond(voter_count)
    if bond > 0:
        assert extcall token.transferFrom(msg.sender, self, bond, default_return_value=True), "disputes: bond transfer failed"
        self.total_bonds += bond
    rid: uint256 = self.report_count + 1
    self.report_count = rid
    deadline: uint256 = block.timestamp + challenge_window
    self.reports[rid] = Report(
        round=round, miner=miner, reporter=msg.sender, kind=kind, segment=segment,
        evidence_hash=evidence_hash, deadline=deadline, status=STATUS_OPEN,
        confirm_weight=weight, reject_weight=0, served_weight=0, votes=1,
        confirms_by_others=0, rejects_by_others=0,
        voter_weight=voter_weight, voter_count=voter_count, class_bound=class_bound,
    )
    self.report_of[round][miner][msg.sender] = rid
    self.open_report[key] = rid
    self.vote_of[rid][msg.sender] = VOTE_CONFIRM
    if kind != KIND_AGGREGATE:  # the round's result waits for it (an aggregate report changes no result)
        extcall rounds.record_report(round, True)
        extcall rewards.report_opened(round, miner)
    extcall staking.report_opened(miner)
    log FraudReported(
        report_id=rid, round=round, miner=miner, reporter=msg.sender, kind=kind, segment=segment,
        evidence_hash=evidence_hash, challenge_sig=challenge_sig, deadline=deadline,
    )
    log FraudVoted(report_id=rid, validator=msg.sender, vote=VOTE_CONFIRM, weight=weight)
    return rid


@internal
def _join(report_id: uint256, weight: uint256):
    """
    @dev A filer's confirming vote on the open report of its evidence (`report_fraud`).
    """
    r: Report = self.reports[report_id]
    assert block.timestamp < r.deadline, "disputes: the report to join is past its window"
    assert self.vote_of[report_id][msg.sender] == 0, "disputes: already voted"
    self.vote_of[report_id][msg.sender] = VOTE_CONFIRM
    r.votes += 1
    r.confirm_weight += weight
    r.confirms_by_others += 1
    self.reports[report_id] = r
    log FraudVoted(report_id=report_id, validator=msg.sender, vote=VOTE_CONFIRM, weight=weight)


@external
def vote_fraud(report_id: uint256, vote: uint8):
    """
    @notice Votes on an open report: 1 confirm, 2 reject, 3 served (the
            unavailable checkpoint was fetched and replays correctly).
            Only the round's permitted validators vote, once each, within the
            window; the accused validator of a `lazy_validator` or
            `wrong_score` report never does.
    @param report_id The report.
    @param vote 1 confirm, 2 reject, 3 served.
    """
    r: Report = self.reports[report_id]
    assert r.status == STATUS_OPEN, "disputes: report not open"
    assert block.timestamp < r.deadline, "disputes: challenge window closed"
    assert vote >= VOTE_CONFIRM and vote <= VOTE_SERVED, "disputes: unknown vote"
    weight: uint256 = staticcall rounds.validator_weight(r.round, msg.sender)
    assert weight > 0, "disputes: not a permitted validator"
    assert msg.sender != r.miner, "disputes: accused cannot vote"
    assert not r.class_bound or self._holds_class(r.miner, msg.sender), "disputes: voter does not hold the miner's class"
    assert self.vote_of[report_id][msg.sender] == 0, "disputes: already voted"
    self.vote_of[report_id][msg.sender] = vote
    r.votes += 1
    if vote == VOTE_CONFIRM:
        r.confirm_weight += weight
        r.confirms_by_others += 1
    elif vote == VOTE_REJECT:
        r.reject_weight += weight
        r.rejects_by_others += 1
    else:
        r.served_weight += weight
    self.reports[report_id] = r
    log FraudVoted(report_id=report_id, validator=msg.sender, vote=vote, weight=weight)


@external
def resolve_fraud(report_id: uint256) -> uint8:
    """
    @notice Resolves a report after its window, or earlier once every permitted
            validator of the round who may vote voted. Anyone may call it.
            An accused is slashed at most once per round: a later confirmed report
            against the same accused and round slashes nothing (its bond is returned).
    @param report_id The report.
    @return The outcome: 2 confirmed, 3 rejected, 4 void.
    """
    r: Report = self.reports[report_id]
    assert r.status == STATUS_OPEN, "disputes: report not open"
    assert block.timestamp >= r.deadline or r.votes >= r.voter_count, "disputes: challenge window open"
    status: uint8 = self._outcome(r, r.voter_weight)
    r.status = status
    self.reports[report_id] = r
    slashed: uint256 = 0
    burned: uint256 = 0
    if status == STATUS_CONFIRMED and not self.slashed_in_round[r.round][r.miner]:
        self.slashed_in_round[r.round][r.miner] = True
        slashed = extcall staking.slash(r.miner, slash_bps, r.reporter, reporter_share_bps)
    if status == STATUS_VOID and r.kind == KIND_UNAVAILABLE and self._served_late(r):
        extcall staking.fine(r.miner, late_serve_fee)
    bond: uint256 = self._bond(r.voter_count)
    if bond > 0:
        self.total_bonds -= bond
        if status == STATUS_REJECTED:
            burned = bond
            extcall IToken(token.address).burn(bond)
        else:
            assert extcall token.transfer(r.reporter, bond, default_return_value=True), "disputes: bond transfer failed"
    extcall staking.report_closed(r.miner)
    if r.kind != KIND_AGGREGATE:
        extcall rounds.record_report(r.round, False)
        extcall rewards.report_resolved(r.round, r.miner, status == STATUS_CONFIRMED)
    log FraudResolved(report_id=report_id, round=r.round, miner=r.miner, status=status, slashed=slashed, bond_burned=burned)
    return status


@view
@internal
def _aggregate_open(round: uint256) -> bool:
    """
    @dev Whether `round`'s aggregate phase is on: its audits closed (the selection is chain
         data once its reports resolve) and its audit deadline is less than `aggregate_window` ago.
    """
    ended: bool = False
    closed: bool = False
    audit_deadline: uint256 = 0
    open_reports: uint256 = 0
    ended, closed, audit_deadline, open_reports = staticcall rounds.result_gate(round)
    return closed and block.timestamp < audit_deadline + aggregate_window


@pure
@internal
def _served_late(r: Report) -> bool:
    """
    @dev Whether most of the voting weight, itself over half of the voters', found the
         checkpoint served only after retrying (`served` votes): the accused was late.
    """
    voting: uint256 = r.confirm_weight + r.reject_weight + r.served_weight
    return voting * 2 > r.voter_weight and r.served_weight > r.confirm_weight + r.reject_weight


@view
@internal
def _bond(voter_count: uint256) -> uint256:
    """
    @dev A report's bond: `report_bond` per voter other than the reporter, at least one.
    """
    return report_bond * max(voter_count, 2) - report_bond


@view
@internal
def _class_voters(round: uint256, miner: address) -> (uint256, uint256, bool):
    """
    @dev Who decides a report against `miner`: the round's validators holding its
         hardware class when their stake reaches the class minimum and 2/3 of the
         round's (their weight, their number, True), else all of them (False), as its
         column's consensus.
    """
    vals: DynArray[address, MAX_VALIDATORS] = staticcall rounds.validators_of(round)
    weights: DynArray[uint256, MAX_VALIDATORS] = staticcall rounds.weights_of(round, vals)
    held: DynArray[bool, MAX_VALIDATORS] = staticcall staking.class_checkers(miner, vals)
    weight: uint256 = 0
    count: uint256 = 0
    total: uint256 = 0
    for j: uint256 in range(len(vals), bound=MAX_VALIDATORS):
        total += weights[j]
        if held[j]:
            weight += weights[j]
            count += 1
    if weight > 0 and weight >= staticcall staking.min_class_stake() and weight * 3 >= total * 2:
        return weight, count, True
    return total, len(vals), False


@view
@internal
def _holds_class(miner: address, validator: address) -> bool:
    """
    @dev Whether `validator` holds `miner`'s hardware class.
    """
    return (staticcall staking.class_checkers(miner, [validator]))[0]


@view
@internal
def _check_lazy_accused(round: uint256, accused: address, segment: uint16, loss_too: bool):
    """
    @dev A `lazy_validator` or `wrong_score` report names another validator that
         revealed in `round` and a miner index within the revealed list (whose
         length is the commit count once anyone revealed); a `wrong_score` report
         may name the index past the last, its held-out loss (`loss_too`).
    """
    assert accused != msg.sender, "disputes: cannot report self"
    assert staticcall IScores(staticcall rounds.scores()).revealed(round, accused), "disputes: accused did not reveal"
    commits: uint256 = (staticcall rounds.round_info(round))[1]
    assert convert(segment, uint256) < commits or (loss_too and convert(segment, uint256) == commits), "disputes: miner index out of range"


@pure
@internal
def _outcome(r: Report, permitted_weight: uint256) -> uint8:
    """
    @dev The status a report resolves to, from its vote weights (see the contract notice).
    """
    voting: uint256 = r.confirm_weight + r.reject_weight + r.served_weight
    if voting * 2 <= permitted_weight:
        return STATUS_VOID
    if r.confirm_weight * 2 > voting and r.confirms_by_others > 0:
        return STATUS_CONFIRMED
    if r.served_weight > r.confirm_weight + r.reject_weight:
        return STATUS_VOID
    if r.rejects_by_others > 0:
        return STATUS_REJECTED
    return STATUS_VOID


@view
@external
def open_in_round(round: uint256) -> uint256:
    """
    @notice Reports of `round` still open (its result waits for 0); the rounds
            contract keeps the count in the round's phase word.
    @param round The round.
    @return The count.
    """
    return staticcall rounds.open_report_count(round)
