# pragma version ~=0.4.3
# SPDX-License-Identifier: AGPL-3.0-only
"""
@title veritrain commits: the miners' update commits of each round
@custom:contract-name commits
@license GNU Affero General Public License v3.0 only
@notice A module of the rounds contract. Miners commit `keccak(update_hash, trace_root)`
        and their step count; the i-th commit is column i of every score vector
        (docs/PROTOCOL.md §8). Nothing here loops over miners.
"""

from . import constants
from . import round_clock
from .interfaces import IStaking

uses: round_clock

MAX_MINERS: constant(uint256) = constants.MAX_MINERS

# the staking registry: a miner's eligibility gates its commit (the rounds contract also
# reads permits and the eligibility clock from it when a round opens)
staking: public(immutable(IStaking))

# per miner: keccak(update_hash, trace_root) with its low 32 bits replaced by the steps it
# trained (bits 16-31) and 1 + its column (its commit order, bits 0-15), so a commit costs one
# storage slot; 0 = no commit
commit_slot: public(HashMap[uint256, HashMap[address, bytes32]])


event UpdateCommitted:
    round: indexed(uint256)
    miner: indexed(address)
    update_hash: bytes32
    trace_root: bytes32
    index: uint256
    steps: uint256  # inner steps the miner trained (0: the run's maximum H)


@deploy
def __init__(staking_: IStaking):
    """
    @dev Names the staking registry.
    """
    staking = staking_


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
    word: uint256 = round_clock.round_word[round]
    start_time: uint256 = word & round_clock.MASK48
    assert start_time != 0, "settlement: round not open"
    assert (word >> round_clock.CLOSED_BLOCK_SHIFT) & round_clock.MASK64 == 0, "settlement: commit phase closed"
    assert block.timestamp < start_time + round_clock.commit_duration, "settlement: commit deadline passed"
    since: uint256 = staticcall staking.eligible_since(msg.sender)
    assert since != 0, "settlement: not an eligible miner"
    assert since <= word >> round_clock.CLOCK_SHIFT, "settlement: not eligible at round open"
    assert self.commit_slot[round][msg.sender] == empty(bytes32), "settlement: already committed"
    count: uint256 = ((word >> round_clock.COUNT_SHIFT) & round_clock.MASK16) + 1
    assert count <= MAX_MINERS, "settlement: round is full"
    digest: uint256 = convert(keccak256(concat(update_hash, trace_root)), uint256)
    self.commit_slot[round][msg.sender] = convert((digest & ~round_clock.MASK32) | (convert(steps, uint256) << 16) | count, bytes32)
    word = (word & ~(round_clock.MASK16 << round_clock.COUNT_SHIFT)) | (count << round_clock.COUNT_SHIFT)
    active: uint256 = (word >> round_clock.ACTIVE_SHIFT) & round_clock.MASK16
    if active != 0 and count >= min(active, MAX_MINERS):
        # the last expected commit closes the phase, inline: it is the dearest commit (60,000 gas target)
        log round_clock.CommitClosed(round=round, block_number=block.number)
        word |= (block.number << round_clock.CLOSED_BLOCK_SHIFT) | (block.timestamp << round_clock.CLOSED_TIME_SHIFT)
    round_clock.round_word[round] = word
    log UpdateCommitted(round=round, miner=msg.sender, update_hash=update_hash, trace_root=trace_root, index=count - 1, steps=convert(steps, uint256))


@view
@external
def commit_index(round: uint256, miner: address) -> uint256:
    """
    @notice 1 + `miner`'s column in `round` (its commit order); 0 when it did not commit.
    @param round The round.
    @param miner The miner.
    @return The column plus one.
    """
    return convert(self.commit_slot[round][miner], uint256) & round_clock.MASK16


@view
@external
def commit_steps(round: uint256, miner: address) -> uint256:
    """
    @notice The inner steps `miner` committed to in `round` (0: the run's maximum H, or no commit).
    @param round The round.
    @param miner The miner.
    @return The committed step count.
    """
    return (convert(self.commit_slot[round][miner], uint256) >> 16) & round_clock.MASK16


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
