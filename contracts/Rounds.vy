# pragma version ~=0.4.3
# SPDX-License-Identifier: AGPL-3.0-only
"""
@title veritrain rounds: the round clock, update commits and seeds
@custom:contract-name rounds
@license GNU Affero General Public License v3.0 only (builds on snekmate)
@notice One round: miners commit `keccak(update_hash, trace_root)` and their step count; the i-th
        commit is column i of every score vector. The commit phase closes at its
        deadline or once every active miner committed, and the hash of the closing
        block seeds the validators' challenges. This contract keeps every phase of
        every round (commit, scoring, reveal, audit, result): the scores contract
        reports score commits, reveals and finished audits here, and the results
        contract ends the round here once a result is final (or the round took the
        fallback), which opens the next one. Phases close early once every
        participant has acted. Nothing here loops over miners. Revert strings keep
        the pre-split "settlement: " prefix.
"""

from snekmate.utils import block_hash
from . import constants
from .interfaces import IBlsKeys
from .interfaces import IRewards
from .interfaces import IRounds
from .interfaces import IStaking

implements: IRounds

MAX_VALIDATORS: constant(uint256) = constants.MAX_VALIDATORS
MAX_MINERS: constant(uint256) = constants.MAX_MINERS
# packed per-round word read on every commit (one cold SLOAD): start time,
# commit count, active miners, closing block, closing time, and the staking
# eligibility clock at the opening (only miners eligible by then may commit)
COUNT_SHIFT: constant(uint256) = 48
ACTIVE_SHIFT: constant(uint256) = 64
CLOSED_BLOCK_SHIFT: constant(uint256) = 80
CLOSED_TIME_SHIFT: constant(uint256) = 144
CLOCK_SHIFT: constant(uint256) = 192
MASK16: constant(uint256) = 2**16 - 1
MASK48: constant(uint256) = 2**48 - 1
MASK64: constant(uint256) = 2**64 - 1
MASK96: constant(uint256) = 2**96 - 1
# packed per-round word of the validators' phases, so each check reads one slot:
# score commits, reveals, finished audits, the early score close time, finalized, and
# the reports still open (a result waits for them), the round's validator snapshot
P_REVEALS_SHIFT: constant(uint256) = 16
P_AUDITS_SHIFT: constant(uint256) = 32
P_SCORE_CLOSED_SHIFT: constant(uint256) = 48
P_FINAL_SHIFT: constant(uint256) = 112
P_REPORTS_SHIFT: constant(uint256) = 128
P_SNAPSHOT_SHIFT: constant(uint256) = 144
MASK32: constant(uint256) = 2**32 - 1
MASK128: constant(uint256) = 2**128 - 1

staking: public(immutable(IStaking))
run_config_hash: public(immutable(bytes32))
genesis_model_hash: public(immutable(bytes32))
commit_duration: public(immutable(uint256))
score_duration: public(immutable(uint256))
reveal_duration: public(immutable(uint256))
audit_duration: public(immutable(uint256))
deployer: immutable(address)

scores: public(address)
rewards: public(IRewards)
results: public(address)
keys: public(IBlsKeys)
started: public(bool)
current_round: public(uint256)
model_hash: public(HashMap[uint256, bytes32])
round_word: HashMap[uint256, uint256]
round_seed: public(HashMap[uint256, bytes32])
# per miner: keccak(update_hash, trace_root) with its low 32 bits replaced by the steps it
# trained (bits 16-31) and 1 + its column (its commit order, bits 0-15), so a commit costs one
# storage slot; 0 = no commit
commit_slot: public(HashMap[uint256, HashMap[address, bytes32]])

# a round points at a snapshot of its permitted validators (by number, from 1, in its phase
# word), stored once per distinct (validators, stakes, key set): a round whose set did not
# change writes nothing for it
snapshot_count: public(uint256)
snapshot_number: HashMap[bytes32, uint256]
snapshot_validators: HashMap[uint256, DynArray[address, MAX_VALIDATORS]]
# per member, one slot a result post reads: its weight (stake, capped at 2**96 - 1) in the
# low 96 bits, and the top 160 bits of keccak256 of its BLS key when the snapshot's
# aggregate holds that key (else 0) in the high ones
snapshot_member: HashMap[uint256, HashMap[address, uint256]]
# the total weight in the low 128 bits, the keyed weight (below) in the high ones
snapshot_weights: HashMap[uint256, uint256]
# the key of the snapshot's cached aggregate BLS key, and that key (a result post reads it
# here, in the contract it already called); keyed weight: the stake of the validators whose
# keys it holds (only they can sign a round's result)
snapshot_key_set: HashMap[uint256, bytes32]
# (x, y) without EIP-2537's 16 zero bytes before each: 96 bytes, three slots
snapshot_aggregate: HashMap[uint256, bytes32[3]]

phase_word: HashMap[uint256, uint256]


event RoundOpened:
    round: indexed(uint256)
    model_hash: bytes32
    start_time: uint256
    active_miners: uint256
    validators: DynArray[address, MAX_VALIDATORS]

event UpdateCommitted:
    round: indexed(uint256)
    miner: indexed(address)
    update_hash: bytes32
    trace_root: bytes32
    index: uint256
    steps: uint256  # inner steps the miner trained (0: the run's maximum H)

event CommitClosed:
    round: indexed(uint256)
    block_number: uint256  # the commit count is in `round_info` and the round's UpdateCommitted events

event SeedStored:
    round: indexed(uint256)
    seed: bytes32

event RoundEnded:
    round: indexed(uint256)
    model_hash: bytes32
    fallback: bool

event Wired:
    scores: address
    rewards: address
    results: address
    keys: address


@deploy
def __init__(
    staking_: IStaking, run_config_hash_: bytes32, genesis_model_hash_: bytes32,
    commit_duration_: uint256, score_duration_: uint256, reveal_duration_: uint256, audit_duration_: uint256,
):
    """
    @notice Fixes the run config: its hash (model, data, replay profile, training
            and compression parameters are hashed off-chain into it), the genesis
            model and the phase durations.
    @param staking_ The staking registry (eligibility and validator permits).
    @param run_config_hash_ Hash of the run config, for nodes to check.
    @param genesis_model_hash_ The model round 0 trains on.
    @param commit_duration_ Seconds the commit phase lasts at most.
    @param score_duration_ Seconds the scoring phase lasts at most.
    @param reveal_duration_ Seconds the reveal phase lasts at most.
    @param audit_duration_ Seconds the audit phase lasts at most, counted from the reveal deadline.
    """
    assert commit_duration_ > 0 and score_duration_ > 0 and reveal_duration_ > 0 and audit_duration_ > 0, "settlement: zero duration"
    assert genesis_model_hash_ != empty(bytes32), "settlement: empty genesis model"
    staking = staking_
    run_config_hash = run_config_hash_
    genesis_model_hash = genesis_model_hash_
    commit_duration = commit_duration_
    score_duration = score_duration_
    reveal_duration = reveal_duration_
    audit_duration = audit_duration_
    deployer = msg.sender


@external
def wire(scores_: address, rewards_: IRewards, results_: address, keys_: IBlsKeys):
    """
    @notice Names the scores, rewards, results and BLS key contracts, once, by the deployer.
    @param scores_ The only caller of the score-phase hooks.
    @param rewards_ Asked at `start` whether the disputes contract is named.
    @param results_ The only caller of `end_round`.
    @param keys_ Caches each round's aggregate BLS key when the round opens.
    """
    assert msg.sender == deployer, "settlement: only deployer"
    assert self.scores == empty(address), "settlement: already wired"
    assert scores_ != empty(address) and rewards_.address != empty(address), "settlement: zero address"
    assert results_ != empty(address) and keys_.address != empty(address), "settlement: zero address"
    self.scores = scores_
    self.rewards = rewards_
    self.results = results_
    self.keys = keys_
    log Wired(scores=scores_, rewards=rewards_.address, results=results_, keys=keys_.address)


@external
def start():
    """
    @notice Opens round 0 on the genesis model. Anyone may call it once at least
            one validator holds a permit and at least one miner is eligible.
    """
    assert not self.started, "settlement: already started"
    assert self.scores != empty(address), "settlement: not wired"
    assert staticcall self.rewards.disputes() != empty(address), "settlement: not wired"
    assert staticcall staking.eligible_miner_count() > 0, "settlement: no eligible miner"
    self.started = True
    self.model_hash[0] = genesis_model_hash
    self._open_round(0)


@external
def end_round(round: uint256, next_model_hash: bytes32, fallback: bool):
    """
    @notice Ends `round` (its result is final, or it took the fallback) and opens
            the next round on `next_model_hash`.
    @dev Only the results contract may call this, once per round, after the audit phase.
    @param round The round that ends.
    @param next_model_hash The model the next round trains on (the same model after a fallback).
    @param fallback Whether the round took the fallback.
    """
    assert msg.sender == self.results, "settlement: only results"
    word: uint256 = self.phase_word[round]
    assert (word >> P_FINAL_SHIFT) & 1 == 0, "settlement: already finalized"
    assert self._audit_closed(round), "settlement: audit phase open"
    assert next_model_hash != empty(bytes32), "settlement: empty model hash"
    self.phase_word[round] = word | (1 << P_FINAL_SHIFT)
    log RoundEnded(round=round, model_hash=next_model_hash, fallback=fallback)
    self.model_hash[round + 1] = next_model_hash
    self._open_round(round + 1)


@external
def commit_update(round: uint256, update_hash: bytes32, trace_root: bytes32, steps: uint16 = 0):
    """
    @notice Commits the caller's update for `round`: one slot
            `keccak(update_hash, trace_root)` with `steps`, at most once per miner per round.
            `update_hash` is bound to the miner's address off-chain, so a copied
            commitment cannot be opened by the copier. Only a miner eligible when
            the round opened may commit (its current eligibility began at or
            before the staking clock the round recorded), so accounts staked later
            neither commit nor count toward the early close; they take part from
            the next round on. At most MAX_MINERS miners commit per round (a reveal
            scores them all); the phase closes early once min(active miners, MAX_MINERS) have
            committed, never when no miner was active at the round's opening (then
            its deadline closes it).
    @param round The open round.
    @param update_hash Hash of the miner's update (bound to its address off-chain).
    @param trace_root Merkle root of the miner's training trace.
    @param steps Inner steps the miner trained this round, 0 for the run's maximum H
           (capacity-scaled work: a multiple of k between the run's minimum and H, which
           validators check against the trace; this contract does not know H or k).
    """
    word: uint256 = self.round_word[round]
    start_time: uint256 = word & MASK48
    assert start_time != 0, "settlement: round not open"
    assert (word >> CLOSED_BLOCK_SHIFT) & MASK64 == 0, "settlement: commit phase closed"
    assert block.timestamp < start_time + commit_duration, "settlement: commit deadline passed"
    since: uint256 = staticcall staking.eligible_since(msg.sender)
    assert since != 0, "settlement: not an eligible miner"
    assert since <= word >> CLOCK_SHIFT, "settlement: not eligible at round open"
    assert self.commit_slot[round][msg.sender] == empty(bytes32), "settlement: already committed"
    count: uint256 = ((word >> COUNT_SHIFT) & MASK16) + 1
    assert count <= MAX_MINERS, "settlement: round is full"
    digest: uint256 = convert(keccak256(concat(update_hash, trace_root)), uint256)
    self.commit_slot[round][msg.sender] = convert((digest & ~MASK32) | (convert(steps, uint256) << 16) | count, bytes32)
    word = (word & ~(MASK16 << COUNT_SHIFT)) | (count << COUNT_SHIFT)
    active: uint256 = (word >> ACTIVE_SHIFT) & MASK16
    if active != 0 and count >= min(active, MAX_MINERS):
        word = self._closed(word, round, count)
    self.round_word[round] = word
    log UpdateCommitted(round=round, miner=msg.sender, update_hash=update_hash, trace_root=trace_root, index=count - 1, steps=convert(steps, uint256))


@external
def close_commit(round: uint256):
    """
    @notice Closes the commit phase of `round` once its deadline has passed.
            Anyone may call it; validators do when nobody else has.
    @param round The round whose commit phase to close.
    """
    word: uint256 = self.round_word[round]
    assert word & MASK48 != 0, "settlement: round not open"
    assert (word >> CLOSED_BLOCK_SHIFT) & MASK64 == 0, "settlement: commit phase closed"
    assert block.timestamp >= (word & MASK48) + commit_duration, "settlement: commit deadline not reached"
    self.round_word[round] = self._closed(word, round, (word >> COUNT_SHIFT) & MASK16)


@external
def store_seed(round: uint256):
    """
    @notice Stores the hash of the block that closed the commit phase, which
            seeds the challenges. Must be sent in a later block. If that block's
            hash is no longer available (it left the 256-block BLOCKHASH window
            and, where EIP-2935 is live, the 8,191-block history), the closing
            block moves to this one (no miner can commit any more, so the new
            seed is as unpredictable).
    @param round The round whose seed to store.
    """
    assert self.round_seed[round] == empty(bytes32), "settlement: seed already stored"
    closed_block: uint256 = (self.round_word[round] >> CLOSED_BLOCK_SHIFT) & MASK64
    assert closed_block != 0, "settlement: commit phase open"
    assert block.number > closed_block, "settlement: seed block not sealed"
    self._store_seed(round, closed_block)


@external
def record_score_commit(round: uint256, validator: address):
    """
    @notice Checks that `validator` may commit scores in `round` now and counts
            the commit; the scoring phase closes once every permitted validator committed.
    @dev Only the scores contract may call this, from `commit_scores`. Stores the
         round's seed first if it is due and nobody has.
    @param round The round being scored.
    @param validator The committing validator.
    """
    assert msg.sender == self.scores, "settlement: only scores"
    snapshot: uint256 = self._snapshot(round)
    assert self.snapshot_member[snapshot][validator] & MASK96 > 0, "settlement: not a permitted validator"
    assert self._commit_closed_time(round) != 0, "settlement: commit phase open"
    self._touch_seed(round)
    assert self.round_seed[round] != empty(bytes32), "settlement: seed not stored"
    assert not self._score_closed(round), "settlement: scoring phase closed"
    word: uint256 = self.phase_word[round] + 1
    if word & MASK16 == len(self.snapshot_validators[snapshot]):
        word |= block.timestamp << P_SCORE_CLOSED_SHIFT
    self.phase_word[round] = word


@external
def record_reveal(round: uint256) -> uint256:
    """
    @notice Checks that `round` is in its reveal phase and counts one reveal.
    @dev Only the scores contract may call this, from `reveal_scores` (which
         reverts as a whole when the reveal does not match its commitment).
         Stores the round's seed first if it is due and nobody has.
    @param round The round being revealed.
    @return The number of miners that committed in `round` (the columns of a score vector).
    """
    assert msg.sender == self.scores, "settlement: only scores"
    self._touch_seed(round)
    assert self._score_closed(round), "settlement: scoring phase open"
    assert block.timestamp < self._reveal_deadline(round), "settlement: reveal deadline passed"
    self.phase_word[round] += 1 << P_REVEALS_SHIFT
    return (self.round_word[round] >> COUNT_SHIFT) & MASK16


@external
def record_audit_done(round: uint256):
    """
    @notice Checks that `round` is in its audit phase and counts one revealed
            validator's finished audits; the audit phase closes once every
            validator that revealed has finished.
    @dev Only the scores contract may call this, from `audits_done`, once per
         revealed validator.
    @param round The round being audited.
    """
    assert msg.sender == self.scores, "settlement: only scores"
    assert self._reveal_closed(round) and not self._audit_closed(round), "settlement: not in audit phase"
    self.phase_word[round] += 1 << P_AUDITS_SHIFT


@external
def record_report(round: uint256, opened: bool):
    """
    @notice Counts a report of `round` opened or resolved; a result of the round may be
            posted only while none is open.
    @dev Only the disputes contract may call this (the one the rewards contract names).
    @param round The reported round.
    @param opened True when a report was filed, False when one was resolved.
    """
    assert msg.sender == staticcall self.rewards.disputes(), "settlement: only disputes"
    if opened:
        self.phase_word[round] += 1 << P_REPORTS_SHIFT
    else:
        self.phase_word[round] -= 1 << P_REPORTS_SHIFT


@view
@external
def round_info(round: uint256) -> (uint256, uint256, uint256, uint256, uint256, bytes32):
    """
    @notice The packed state of `round`.
    @param round The round.
    @return Start time, commits, active miners, commit-closing block, commit-closing time, seed.
    """
    word: uint256 = self.round_word[round]
    return (
        word & MASK48, (word >> COUNT_SHIFT) & MASK16, (word >> ACTIVE_SHIFT) & MASK16,
        (word >> CLOSED_BLOCK_SHIFT) & MASK64, (word >> CLOSED_TIME_SHIFT) & MASK48, self.round_seed[round],
    )


@view
@external
def audit_closed(round: uint256) -> bool:
    """
    @notice Whether the audit phase of `round` is over (a result may be posted
            once its reports are resolved too).
    @param round The round.
    @return True once the audit phase closed.
    """
    return self._audit_closed(round)


@view
@external
def opening_clock(round: uint256) -> uint256:
    """
    @notice The staking eligibility clock recorded when `round` opened: a miner
            may commit in `round` only if its `eligible_since` is at most this.
    @param round The round.
    @return The clock value (0 for a round not open).
    """
    return self.round_word[round] >> CLOCK_SHIFT


@view
@external
def phase(round: uint256) -> uint8:
    """
    @notice The phase `round` is in.
    @param round The round.
    @return 0 not open, 1 commit, 2 scoring, 3 reveal, 4 audit, 5 result (posting and challenges), 6 ended.
    """
    if self._finalized(round):
        return 6
    word: uint256 = self.round_word[round]
    if word & MASK48 == 0:
        return 0
    if self._commit_closed_time(round) == 0:
        return 1
    if not self._score_closed(round):
        return 2
    if not self._reveal_closed(round):
        return 3
    if not self._audit_closed(round):
        return 4
    return 5


@view
@external
def deadlines(round: uint256) -> (uint256, uint256, uint256, uint256):
    """
    @notice The phase deadlines of `round` as timestamps.
    @param round The round.
    @return Commit, scoring, reveal and audit deadlines; the later three are 0 until the commit phase has closed.
    """
    start_time: uint256 = self.round_word[round] & MASK48
    if start_time == 0:
        return 0, 0, 0, 0
    if self._commit_closed_time(round) == 0:
        return start_time + commit_duration, 0, 0, 0
    reveal_deadline: uint256 = self._reveal_deadline(round)
    return start_time + commit_duration, self._score_close_time(round), reveal_deadline, reveal_deadline + audit_duration


@view
@external
def validators_of(round: uint256) -> DynArray[address, MAX_VALIDATORS]:
    """
    @notice The permitted validators of `round`, snapshotted when it opened.
    @param round The round.
    @return The validators, highest stake first.
    """
    return self.snapshot_validators[self._snapshot(round)]


@view
@external
def validator_weight(round: uint256, validator: address) -> uint256:
    """
    @notice The stake `validator` held when `round` opened, if it held a permit (else 0).
    @param round The round.
    @param validator The account.
    @return Its weight in the round.
    """
    return self.snapshot_member[self._snapshot(round)][validator] & MASK96


@view
@external
def signing_facts(round: uint256, accounts: DynArray[address, MAX_VALIDATORS]) -> (DynArray[uint256, MAX_VALIDATORS], Bytes[128], uint256, uint256):
    """
    @notice What a result post checks, in one call: the member records of `accounts`
            (weight in the low 96 bits, the top 160 bits of their key's keccak256 when
            the round's aggregate holds it), the round's aggregate BLS key (EIP-2537
            G1, all zero for the point at infinity), and the stake of its keyed
            validators and of all its validators.
    @param round The round.
    @param accounts Validators (0 for an account without a permit).
    @return Records, aggregate key, keyed weight, total weight.
    """
    snapshot: uint256 = self._snapshot(round)
    records: DynArray[uint256, MAX_VALIDATORS] = []
    for a: address in accounts:
        records.append(self.snapshot_member[snapshot][a])
    weights: uint256 = self.snapshot_weights[snapshot]
    packed: bytes32[3] = self.snapshot_aggregate[snapshot]
    xy: Bytes[96] = concat(packed[0], packed[1], packed[2])
    aggregate: Bytes[128] = concat(empty(bytes16), slice(xy, 0, 48), empty(bytes16), slice(xy, 48, 48))
    return records, aggregate, weights >> 128, weights & MASK128


@view
@external
def result_gate(round: uint256) -> (bool, bool, uint256, uint256):
    """
    @notice What a result post or fallback checks, in one call.
    @param round The round.
    @return Whether it ended, whether its audit phase closed, its audit deadline (0
            before its commit phase closed) and how many of its reports are open.
    """
    if (self.round_word[round] >> CLOSED_TIME_SHIFT) & MASK48 == 0:
        return False, False, 0, 0
    return self._finalized(round), self._audit_closed(round), self._reveal_deadline(round) + audit_duration, self._open_reports(round)


@view
@external
def open_report_count(round: uint256) -> uint256:
    """
    @notice How many reports filed against `round` are not resolved yet.
    @param round The round.
    @return The count.
    """
    return self._open_reports(round)


@view
@internal
def _open_reports(round: uint256) -> uint256:
    """
    @dev The open-report count of `round`'s phase word.
    """
    return (self.phase_word[round] >> P_REPORTS_SHIFT) & MASK16


@view
@external
def round_snapshot(round: uint256) -> uint256:
    """
    @notice The number of the validator snapshot `round` uses (0: not open).
    @param round The round.
    @return The snapshot number.
    """
    return self._snapshot(round)


@view
@internal
def _snapshot(round: uint256) -> uint256:
    """
    @dev The snapshot number in `round`'s phase word.
    """
    return (self.phase_word[round] >> P_SNAPSHOT_SHIFT) & MASK32


@view
@external
def score_commit_count(round: uint256) -> uint256:
    """
    @notice How many permitted validators committed scores in `round`.
    @param round The round.
    @return The count.
    """
    return self.phase_word[round] & MASK16


@view
@external
def score_closed_time(round: uint256) -> uint256:
    """
    @notice When the scoring phase of `round` closed early (every validator committed), else 0.
    @param round The round.
    @return The time.
    """
    return (self.phase_word[round] >> P_SCORE_CLOSED_SHIFT) & MASK64


@view
@external
def finalized(round: uint256) -> bool:
    """
    @notice Whether `round` ended (its result final, or the fallback taken).
    @param round The round.
    @return True once it ended.
    """
    return self._finalized(round)


@view
@internal
def _finalized(round: uint256) -> bool:
    """
    @dev Whether `round` ended.
    """
    return (self.phase_word[round] >> P_FINAL_SHIFT) & 1 != 0


@view
@external
def total_weight(round: uint256) -> uint256:
    """
    @notice The stake of all permitted validators of `round`.
    @param round The round.
    @return The total weight.
    """
    return self.snapshot_weights[self._snapshot(round)] & MASK128


@view
@external
def validator_set_hash(round: uint256) -> bytes32:
    """
    @notice The key of the round's cached aggregate BLS key (`BlsKeys.aggregate_of`).
    @param round The round.
    @return The set hash.
    """
    return self.snapshot_key_set[self._snapshot(round)]


@view
@external
def keyed_weight(round: uint256) -> uint256:
    """
    @notice The stake of the round's validators whose BLS keys its aggregate holds.
    @param round The round.
    @return The keyed weight.
    """
    return self.snapshot_weights[self._snapshot(round)] >> 128


@view
@external
def weights_of(round: uint256, accounts: DynArray[address, MAX_VALIDATORS]) -> DynArray[uint256, MAX_VALIDATORS]:
    """
    @notice The snapshotted weights of `accounts` in `round`, in the same order.
    @param round The round.
    @param accounts Validators (0 for an account without a permit).
    @return One weight per account.
    """
    snapshot: uint256 = self._snapshot(round)
    out: DynArray[uint256, MAX_VALIDATORS] = []
    for a: address in accounts:
        out.append(self.snapshot_member[snapshot][a] & MASK96)
    return out


@view
@external
def commit_index(round: uint256, miner: address) -> uint256:
    """
    @notice 1 + `miner`'s column in `round` (its commit order); 0 when it did not commit.
    @param round The round.
    @param miner The miner.
    @return The column plus one.
    """
    return convert(self.commit_slot[round][miner], uint256) & MASK16


@view
@external
def commit_steps(round: uint256, miner: address) -> uint256:
    """
    @notice The inner steps `miner` committed to in `round` (0: the run's maximum H, or no commit).
    @param round The round.
    @param miner The miner.
    @return The committed step count.
    """
    return (convert(self.commit_slot[round][miner], uint256) >> 16) & MASK16


@view
@external
def has_committed(round: uint256, miner: address) -> bool:
    """
    @notice Whether `miner` committed an update in `round`.
    @param round The round.
    @param miner The miner.
    @return True when it committed.
    """
    return self.commit_slot[round][miner] != empty(bytes32)


@view
@external
def reporting_open(round: uint256) -> bool:
    """
    @notice Whether reports of every kind for `round` may be filed: after the
            commit phase closed, until the audit phase is over.
    @param round The round.
    @return True while reports are accepted.
    """
    if self._finalized(round) or self._commit_closed_time(round) == 0:
        return False
    return not self._audit_closed(round)


@internal
def _open_round(round: uint256):
    """
    @dev Points `round` at the snapshot of the permitted validators, their stakes and
         their keys (stored if new), counts the active miners, records the staking
         eligibility clock and starts the commit phase of `round` now.
    """
    addrs: DynArray[address, MAX_VALIDATORS] = []
    stakes: DynArray[uint256, MAX_VALIDATORS] = []
    addrs, stakes = staticcall staking.top_validators()
    assert len(addrs) > 0, "settlement: no permitted validator"
    # the aggregate BLS key of this set is computed once per distinct set and cached
    set_hash: bytes32 = empty(bytes32)
    mask: uint256 = 0
    set_hash, mask = extcall self.keys.cache_aggregate(addrs)
    content: bytes32 = keccak256(abi_encode(addrs, stakes, set_hash))
    snapshot: uint256 = self.snapshot_number[content]
    if snapshot == 0:
        snapshot = self.snapshot_count + 1
        self.snapshot_count = snapshot
        self.snapshot_number[content] = snapshot
        self._store_snapshot(snapshot, addrs, stakes, set_hash, mask)
    self.phase_word[round] = snapshot << P_SNAPSHOT_SHIFT
    active: uint256 = min(staticcall staking.eligible_miner_count(), MASK16)
    clock: uint256 = min(staticcall staking.eligibility_clock(), MASK64)
    self.round_word[round] = block.timestamp | (active << ACTIVE_SHIFT) | (clock << CLOCK_SHIFT)
    self.current_round = round
    log RoundOpened(round=round, model_hash=self.model_hash[round], start_time=block.timestamp, active_miners=active, validators=addrs)


@internal
def _store_snapshot(snapshot: uint256, addrs: DynArray[address, MAX_VALIDATORS], stakes: DynArray[uint256, MAX_VALIDATORS], set_hash: bytes32, mask: uint256):
    """
    @dev Stores a new validator snapshot: weights, their total, the key set and the
         stake of the validators whose keys it holds.
    """
    total: uint256 = 0
    keyed: uint256 = 0
    for i: uint256 in range(len(addrs), bound=MAX_VALIDATORS):
        weight: uint256 = min(stakes[i], MASK96)  # a larger stake still opens the round
        record: uint256 = weight
        if mask & (1 << i) != 0:
            keyed += weight
            key_hash: uint256 = convert(staticcall self.keys.member_key_hash(set_hash, addrs[i]), uint256)
            record |= (key_hash >> 96) << 96
        self.snapshot_member[snapshot][addrs[i]] = record
        total += weight
    self.snapshot_validators[snapshot] = addrs
    self.snapshot_weights[snapshot] = total | (keyed << 128)
    self.snapshot_key_set[snapshot] = set_hash
    aggregate: Bytes[128] = staticcall self.keys.aggregate_of(set_hash)
    xy: Bytes[96] = concat(slice(aggregate, 16, 48), slice(aggregate, 80, 48))
    self.snapshot_aggregate[snapshot] = [extract32(xy, 0), extract32(xy, 32), extract32(xy, 64)]


@internal
def _closed(word: uint256, round: uint256, count: uint256) -> uint256:
    """
    @dev Returns `word` with the commit phase closed in this block; logs `CommitClosed`.
    """
    log CommitClosed(round=round, block_number=block.number)
    return word | (block.number << CLOSED_BLOCK_SHIFT) | (block.timestamp << CLOSED_TIME_SHIFT)


@internal
def _store_seed(round: uint256, closed_block: uint256):
    """
    @dev Stores the closing block's hash as the seed, or, when that hash is no
         longer available (snekmate's `block_hash` returns zero), re-closes the
         commit phase in this block so the seed can be stored from the next one.
    """
    seed: bytes32 = block_hash._block_hash(closed_block)
    if seed == empty(bytes32):
        word: uint256 = self.round_word[round] & ~(MASK64 << CLOSED_BLOCK_SHIFT)
        self.round_word[round] = word | (block.number << CLOSED_BLOCK_SHIFT)
        log CommitClosed(round=round, block_number=block.number)
        return
    self.round_seed[round] = seed
    log SeedStored(round=round, seed=seed)


@internal
def _touch_seed(round: uint256):
    """
    @dev Stores the seed of `round` if it is due, nobody stored it yet and the
         closing block's hash is still available; never re-closes.
    """
    if self.round_seed[round] != empty(bytes32):
        return
    closed_block: uint256 = (self.round_word[round] >> CLOSED_BLOCK_SHIFT) & MASK64
    if closed_block != 0 and block.number > closed_block:
        seed: bytes32 = block_hash._block_hash(closed_block)
        if seed != empty(bytes32):
            self.round_seed[round] = seed
            log SeedStored(round=round, seed=seed)


@view
@internal
def _commit_closed_time(round: uint256) -> uint256:
    """
    @dev When the commit phase of `round` closed (0 while open).
    """
    return (self.round_word[round] >> CLOSED_TIME_SHIFT) & MASK48


@view
@internal
def _score_close_time(round: uint256) -> uint256:
    """
    @dev When the scoring phase of `round` closes (or closed early).
    """
    closed_early: uint256 = (self.phase_word[round] >> P_SCORE_CLOSED_SHIFT) & MASK64
    if closed_early != 0:
        return closed_early
    # count from the commit deadline at the latest: a late `close_commit` must not
    # stretch the dispute timeline past the unbonding delay
    word: uint256 = self.round_word[round]
    return min((word >> CLOSED_TIME_SHIFT) & MASK48, (word & MASK48) + commit_duration) + score_duration


@view
@internal
def _score_closed(round: uint256) -> bool:
    """
    @dev Whether the scoring phase of `round` is over.
    """
    if self._commit_closed_time(round) == 0:
        return False
    return (self.phase_word[round] >> P_SCORE_CLOSED_SHIFT) & MASK64 != 0 or block.timestamp >= self._score_close_time(round)


@view
@internal
def _reveal_deadline(round: uint256) -> uint256:
    """
    @dev The reveal deadline of `round` (meaningful once its commit phase closed).
    """
    return self._score_close_time(round) + reveal_duration


@view
@internal
def _reveal_closed(round: uint256) -> bool:
    """
    @dev Whether the reveal phase of `round` is over: its deadline passed, or
         every validator that committed scores revealed them.
    """
    if not self._score_closed(round):
        return False
    if block.timestamp >= self._reveal_deadline(round):
        return True
    word: uint256 = self.phase_word[round]
    return (word >> P_REVEALS_SHIFT) & MASK16 == word & MASK16


@view
@internal
def _audit_closed(round: uint256) -> bool:
    """
    @dev Whether the audit phase of `round` is over: the reveal phase is over and
         either the audit deadline passed or every validator that revealed
         finished its audits (at once when nobody revealed: nothing to audit).
    """
    if not self._reveal_closed(round):
        return False
    if block.timestamp >= self._reveal_deadline(round) + audit_duration:
        return True
    word: uint256 = self.phase_word[round]
    return (word >> P_AUDITS_SHIFT) & MASK16 == (word >> P_REVEALS_SHIFT) & MASK16
