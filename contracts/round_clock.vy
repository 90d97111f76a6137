# pragma version ~=0.4.3
# SPDX-License-Identifier: AGPL-3.0-only
"""
@title veritrain round clock: each round's phases, as two packed words per round
@custom:contract-name round_clock
@license GNU Affero General Public License v3.0 only
@notice A module of the rounds contract. A round's commit phase closes at its deadline
        or once every active miner committed; the scoring, reveal and audit phases
        follow, each closing early once every participant has acted (docs/PROTOCOL.md
        §5). The hash of the block that closed the commit phase, mixed with the RANDAO
        of the later block that stores it, seeds the validators' challenges. Revert strings keep the pre-split "settlement: " prefix.
"""

from snekmate.utils import block_hash

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

commit_duration: public(immutable(uint256))
score_duration: public(immutable(uint256))
reveal_duration: public(immutable(uint256))
audit_duration: public(immutable(uint256))

round_word: HashMap[uint256, uint256]
round_seed: public(HashMap[uint256, bytes32])
phase_word: HashMap[uint256, uint256]


event CommitClosed:
    round: indexed(uint256)
    block_number: uint256  # the commit count is in `round_info` and the round's UpdateCommitted events

event SeedStored:
    round: indexed(uint256)
    seed: bytes32


@deploy
def __init__(commit_duration_: uint256, score_duration_: uint256, reveal_duration_: uint256, audit_duration_: uint256):
    """
    @dev Fixes the phase durations (seconds each phase lasts at most; the audit phase
         counts from the reveal deadline).
    """
    assert commit_duration_ > 0 and score_duration_ > 0 and reveal_duration_ > 0 and audit_duration_ > 0, "settlement: zero duration"
    commit_duration = commit_duration_
    score_duration = score_duration_
    reveal_duration = reveal_duration_
    audit_duration = audit_duration_


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
    log CommitClosed(round=round, block_number=block.number)
    self.round_word[round] = word | (block.number << CLOSED_BLOCK_SHIFT) | (block.timestamp << CLOSED_TIME_SHIFT)


@external
def store_seed(round: uint256):
    """
    @notice Stores the seed of the challenges and committees: the hash of the
            block that closed the commit phase mixed with this block's RANDAO
            (keccak256(hash ‖ prevrandao)). Must be sent in a later block. If that block's
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


@internal
def _open(round: uint256, snapshot: uint256, active: uint256, clock: uint256):
    """
    @dev Starts the commit phase of `round` now, on validator snapshot `snapshot`.
    """
    self.phase_word[round] = snapshot << P_SNAPSHOT_SHIFT
    self.round_word[round] = block.timestamp | (active << ACTIVE_SHIFT) | (clock << CLOCK_SHIFT)


@internal
def _count_score_commit(round: uint256, validators: uint256):
    """
    @dev Counts one score commit; the scoring phase closes now once all `validators` committed.
    """
    word: uint256 = self.phase_word[round] + 1
    if word & MASK16 == validators:
        word |= block.timestamp << P_SCORE_CLOSED_SHIFT
    self.phase_word[round] = word


@internal
def _count_reveal(round: uint256) -> uint256:
    """
    @dev Counts one reveal; returns the round's commit count (the columns of a score vector).
    """
    self.phase_word[round] += 1 << P_REVEALS_SHIFT
    return (self.round_word[round] >> COUNT_SHIFT) & MASK16


@internal
def _count_audit_done(round: uint256):
    """
    @dev Counts one revealed validator's finished audits.
    """
    self.phase_word[round] += 1 << P_AUDITS_SHIFT


@internal
def _count_report(round: uint256, opened: bool):
    """
    @dev Counts a report of `round` opened (True) or resolved (False).
    """
    if opened:
        self.phase_word[round] += 1 << P_REPORTS_SHIFT
    else:
        self.phase_word[round] -= 1 << P_REPORTS_SHIFT


@internal
def _finalize(round: uint256):
    """
    @dev Marks `round` ended, once, after its audit phase.
    """
    word: uint256 = self.phase_word[round]
    assert (word >> P_FINAL_SHIFT) & 1 == 0, "settlement: already finalized"
    assert self._audit_closed(round), "settlement: audit phase open"
    self.phase_word[round] = word | (1 << P_FINAL_SHIFT)


@internal
def _store_seed(round: uint256, closed_block: uint256):
    """
    @dev Stores the closing block's hash as the seed, or, when that hash is no
         longer available (snekmate's `block_hash` returns zero), re-closes the
         commit phase in this block so the seed can be stored from the next one.
    """
    if not self._seed(round, closed_block):
        word: uint256 = self.round_word[round] & ~(MASK64 << CLOSED_BLOCK_SHIFT)
        self.round_word[round] = word | (block.number << CLOSED_BLOCK_SHIFT)
        log CommitClosed(round=round, block_number=block.number)


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
        self._seed(round, closed_block)


@internal
def _seed(round: uint256, closed_block: uint256) -> bool:
    """
    @dev Stores `round`'s seed, the closing block's hash mixed with this block's RANDAO, when
         that hash is still available.
    """
    seed: bytes32 = block_hash._block_hash(closed_block)
    if seed == empty(bytes32):
        return False
    # mixed with this block's RANDAO: the closing block's proposer can grind its own hash, not
    # a later block's randomness (which its proposer can only withhold, one bit)
    seed = keccak256(concat(seed, block.prevrandao))
    self.round_seed[round] = seed
    log SeedStored(round=round, seed=seed)
    return True


@view
@internal
def _snapshot(round: uint256) -> uint256:
    """
    @dev The snapshot number in `round`'s phase word.
    """
    return (self.phase_word[round] >> P_SNAPSHOT_SHIFT) & MASK32


@view
@internal
def _open_reports(round: uint256) -> uint256:
    """
    @dev The open-report count of `round`'s phase word.
    """
    return (self.phase_word[round] >> P_REPORTS_SHIFT) & MASK16


@view
@internal
def _finalized(round: uint256) -> bool:
    """
    @dev Whether `round` ended.
    """
    return (self.phase_word[round] >> P_FINAL_SHIFT) & 1 != 0


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
