# pragma version ~=0.4.3
# SPDX-License-Identifier: AGPL-3.0-only
"""
@title veritrain round status: what the round clock says about a round
@custom:contract-name round_status
@license GNU Affero General Public License v3.0 only
@notice A module of the rounds contract: the views of a round's phase, deadlines and
        counts, read from the round clock's two words (docs/PROTOCOL.md §5).
"""

from . import round_clock

uses: round_clock


@view
@external
def round_info(round: uint256) -> (uint256, uint256, uint256, uint256, uint256, bytes32):
    """
    @notice The packed state of `round`.
    @param round The round.
    @return Start time, commits, active miners, commit-closing block, commit-closing time, seed.
    """
    word: uint256 = round_clock.round_word[round]
    return (
        word & round_clock.MASK48, (word >> round_clock.COUNT_SHIFT) & round_clock.MASK16,
        (word >> round_clock.ACTIVE_SHIFT) & round_clock.MASK16,
        (word >> round_clock.CLOSED_BLOCK_SHIFT) & round_clock.MASK64,
        (word >> round_clock.CLOSED_TIME_SHIFT) & round_clock.MASK48, round_clock.round_seed[round],
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
    return round_clock._audit_closed(round)


@view
@external
def opening_clock(round: uint256) -> uint256:
    """
    @notice The staking eligibility clock recorded when `round` opened: a miner
            may commit in `round` only if its `eligible_since` is at most this.
    @param round The round.
    @return The clock value (0 for a round not open).
    """
    return round_clock.round_word[round] >> round_clock.CLOCK_SHIFT


@view
@external
def phase(round: uint256) -> uint8:
    """
    @notice The phase `round` is in.
    @param round The round.
    @return 0 not open, 1 commit, 2 scoring, 3 reveal, 4 audit, 5 result (posting and challenges), 6 ended.
    """
    if round_clock._finalized(round):
        return 6
    word: uint256 = round_clock.round_word[round]
    if word & round_clock.MASK48 == 0:
        return 0
    if round_clock._commit_closed_time(round) == 0:
        return 1
    if not round_clock._score_closed(round):
        return 2
    if not round_clock._reveal_closed(round):
        return 3
    if not round_clock._audit_closed(round):
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
    start_time: uint256 = round_clock.round_word[round] & round_clock.MASK48
    if start_time == 0:
        return 0, 0, 0, 0
    commit_deadline: uint256 = start_time + round_clock.commit_duration
    if round_clock._commit_closed_time(round) == 0:
        return commit_deadline, 0, 0, 0
    reveal_deadline: uint256 = round_clock._reveal_deadline(round)
    return commit_deadline, round_clock._score_close_time(round), reveal_deadline, reveal_deadline + round_clock.audit_duration


@view
@external
def result_gate(round: uint256) -> (bool, bool, uint256, uint256):
    """
    @notice What a result post or fallback checks, in one call.
    @param round The round.
    @return Whether it ended, whether its audit phase closed, its audit deadline (0
            before its commit phase closed) and how many of its reports are open.
    """
    if round_clock._commit_closed_time(round) == 0:
        return False, False, 0, 0
    return (
        round_clock._finalized(round), round_clock._audit_closed(round),
        round_clock._reveal_deadline(round) + round_clock.audit_duration, round_clock._open_reports(round),
    )


@view
@external
def open_report_count(round: uint256) -> uint256:
    """
    @notice How many reports filed against `round` are not resolved yet.
    @param round The round.
    @return The count.
    """
    return round_clock._open_reports(round)


@view
@external
def finalized(round: uint256) -> bool:
    """
    @notice Whether `round` ended (its result final, or the fallback taken).
    @param round The round.
    @return True once it ended.
    """
    return round_clock._finalized(round)


@view
@external
def reporting_open(round: uint256) -> bool:
    """
    @notice Whether reports of every kind for `round` may be filed: after the
            commit phase closed, until the audit phase is over.
    @param round The round.
    @return True while reports are accepted.
    """
    if round_clock._finalized(round) or round_clock._commit_closed_time(round) == 0:
        return False
    return not round_clock._audit_closed(round)
