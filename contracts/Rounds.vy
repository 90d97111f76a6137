# pragma version ~=0.4.3
# pragma optimize codesize
# (codesize: the round clock and its modules fill most of the 60 % of EIP-170 a contract may take; it costs a commit about 110 gas)
# SPDX-License-Identifier: AGPL-3.0-only
"""
@title veritrain rounds: the round clock, update commits and seeds
@custom:contract-name rounds
@license GNU Affero General Public License v3.0 only (builds on snekmate)
@notice One round: miners commit `keccak(update_hash, trace_root)` and their step count; the i-th
        commit is column i of every score vector. The commit phase closes at its
        deadline or once every active miner committed, and the hash of the closing
        block, mixed with the RANDAO of the block that stores it, seeds the validators'
        challenges. This contract keeps every phase of
        every round (commit, scoring, reveal, audit, result): the scores contract
        reports score commits, reveals and finished audits here, and the results
        contract ends the round here once a result is final (or the round took the
        fallback), which opens the next one. Phases close early once every
        participant has acted. Nothing here loops over miners. Revert strings keep
        the pre-split "settlement: " prefix.
        Composed of modules: `round_clock` (the phases of each round, as two packed
        words), `round_status` (their views), `commits` (the miners' update commits)
        and `validator_snapshots` (each round's permitted validators, stakes and keys).
"""

from . import commits
from . import constants
from . import round_clock
from . import round_status
from . import validator_snapshots
from .interfaces import IBlsKeys
from .interfaces import IRewards
from .interfaces import IRounds
from .interfaces import IStaking

implements: IRounds

initializes: round_clock
initializes: commits[round_clock := round_clock]
initializes: validator_snapshots[round_clock := round_clock]
initializes: round_status[round_clock := round_clock]

exports: (
    round_clock.commit_duration,
    round_clock.score_duration,
    round_clock.reveal_duration,
    round_clock.audit_duration,
    round_clock.round_seed,
    round_clock.close_commit,
    round_clock.store_seed,
    round_status.__interface__,
    commits.staking,
    commits.commit_slot,
    commits.commit_update,
    commits.commit_index,
    commits.commit_steps,
    commits.has_committed,
    validator_snapshots.keys,
    validator_snapshots.snapshot_of,
    validator_snapshots.validators_of,
    validator_snapshots.validator_at,
    validator_snapshots.validator_count,
    validator_snapshots.validator_weight,
    validator_snapshots.member_record,
    validator_snapshots.signing_facts,
    validator_snapshots.total_weight,
    validator_snapshots.weights_of,
)

MAX_VALIDATORS: constant(uint256) = constants.MAX_VALIDATORS
MASK16: constant(uint256) = 2**16 - 1
MASK64: constant(uint256) = 2**64 - 1
MASK96: constant(uint256) = 2**96 - 1

run_config_hash: public(immutable(bytes32))
genesis_model_hash: public(immutable(bytes32))
deployer: immutable(address)

scores: public(address)
rewards: public(IRewards)
results: public(address)
started: public(bool)
current_round: public(uint256)
model_hash: public(HashMap[uint256, bytes32])


event RoundOpened:
    round: indexed(uint256)
    model_hash: bytes32
    start_time: uint256
    active_miners: uint256
    snapshot: uint256  # the permitted set's version: `validators_of(round)` lists it

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
    round_clock.__init__(commit_duration_, score_duration_, reveal_duration_, audit_duration_)
    assert genesis_model_hash_ != empty(bytes32), "settlement: empty genesis model"
    commits.__init__(staking_)
    run_config_hash = run_config_hash_
    genesis_model_hash = genesis_model_hash_
    deployer = msg.sender


@external
def wire(scores_: address, rewards_: IRewards, results_: address, keys_: IBlsKeys):
    """
    @notice Names the scores, rewards, results and BLS key contracts, once, by the deployer.
    @param scores_ The only caller of the score-phase hooks.
    @param rewards_ Asked at `start` whether the disputes contract is named.
    @param results_ The only caller of `end_round`.
    @param keys_ Keeps the permitted set's log; each round that opens freezes a version.
    """
    assert msg.sender == deployer, "settlement: only deployer"
    assert self.scores == empty(address), "settlement: already wired"
    # one assert per message: each costs code (EIP-170)
    assert (scores_ != empty(address) and rewards_.address != empty(address)
            and results_ != empty(address) and keys_.address != empty(address)), "settlement: zero address"
    self.scores = scores_
    self.rewards = rewards_
    self.results = results_
    validator_snapshots.keys = keys_
    log Wired(scores=scores_, rewards=rewards_.address, results=results_, keys=keys_.address)


@external
def start():
    """
    @notice Opens round 0 on the genesis model. Anyone may call it once at least
            one validator holds a permit and at least one miner is eligible.
    """
    assert not self.started, "settlement: already started"
    assert self.scores != empty(address) and staticcall self.rewards.disputes() != empty(address), "settlement: not wired"
    assert staticcall commits.staking.eligible_miner_count() > 0, "settlement: no eligible miner"
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
    round_clock._finalize(round)
    assert next_model_hash != empty(bytes32), "settlement: empty model hash"
    log RoundEnded(round=round, model_hash=next_model_hash, fallback=fallback)
    self.model_hash[round + 1] = next_model_hash
    self._open_round(round + 1)


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
    record: uint256 = validator_snapshots._record(round, validator)
    assert record & MASK96 > 0, "settlement: not a permitted validator"
    assert round_clock._commit_closed_time(round) != 0, "settlement: commit phase open"
    round_clock._touch_seed(round)
    assert round_clock.round_seed[round] != empty(bytes32), "settlement: seed not stored"
    assert not round_clock._score_closed(round), "settlement: scoring phase closed"
    round_clock._count_score_commit(round, validator_snapshots._totals(round)[0])


@external
def record_reveal(round: uint256, validator: address) -> uint256:
    """
    @notice Checks that `round` is in its reveal phase and counts `validator`'s reveal
            (its weight then counts toward the round's certificate).
    @dev Only the scores contract may call this, from `reveal_scores` (which
         reverts as a whole when the reveal does not match its commitment).
         Stores the round's seed first if it is due and nobody has.
    @param round The round being revealed.
    @param validator The revealing validator.
    @return The number of miners that committed in `round` (the columns of a score vector).
    """
    assert msg.sender == self.scores, "settlement: only scores"
    round_clock._touch_seed(round)
    assert round_clock._score_closed(round), "settlement: scoring phase open"
    assert block.timestamp < round_clock._reveal_deadline(round), "settlement: reveal deadline passed"
    validator_snapshots._record_reveal(round, validator)
    return round_clock._count_reveal(round)


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
    assert round_clock._reveal_closed(round) and not round_clock._audit_closed(round), "settlement: not in audit phase"
    round_clock._count_audit_done(round)


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
    round_clock._count_report(round, opened)


@internal
def _open_round(round: uint256):
    """
    @dev Points `round` at the permitted validators, their stakes and their keys as
         they stand now (a frozen version of the key registry's log), counts the active miners, records the staking
         eligibility clock and starts the commit phase of `round` now.
    """
    assert staticcall commits.staking.validator_count() > 0, "settlement: no permitted validator"
    snapshot: uint256 = validator_snapshots._take()
    active: uint256 = min(staticcall commits.staking.eligible_miner_count(), MASK16)
    clock: uint256 = min(staticcall commits.staking.eligibility_clock(), MASK64)
    round_clock._open(round, snapshot, active, clock)
    self.current_round = round
    log RoundOpened(round=round, model_hash=self.model_hash[round], start_time=block.timestamp, active_miners=active, snapshot=snapshot)
