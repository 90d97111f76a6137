# pragma version ~=0.4.3
# SPDX-License-Identifier: AGPL-3.0-only
"""
@title veritrain column challenges: one column of a result
@custom:contract-name column_challenges
@license GNU Affero General Public License v3.0 only
@notice During a posted result's challenge window anyone may dispute one
        column of it here, posting the chain data it depends on: its
        consensus, pay, credits, miner, and its reputation and cumulative when
        the miner has no earlier entry. The
        contract recomputes them from chain data and the reveals of the
        validators whose numbers count in the column (its deciders that
        revealed: a committee's seat holders, at most 2c of them, or its class's
        holders), each checked against its vector root (docs/PROTOCOL.md §11): a wrong value rejects the attempt through the
        results contract and returns the bond; a right one burns it. The tree's
        shape and its nodes are disputed (and its parts demanded) in the tree
        challenges contract, the header's words (its identity, n, quorum,
        held-out loss, minted, the model without quorum), account history and
        claims in the account challenges contract.
"""

from ethereum.ercs import IERC20
from . import challenge_base
from . import committee_draw
from . import constants
from . import result_math
from . import score_entries
from .interfaces import IChainFacts
from .interfaces import IForfeits
from .interfaces import IResults
from .interfaces import IStaking
from .interfaces import IVectorRoots

initializes: challenge_base

exports: (
    challenge_base.token,
    challenge_base.rounds,
    challenge_base.scores,
    challenge_base.rewards,
    challenge_base.results,
    challenge_base.challenge_bond,
)

MAX_VALIDATORS: constant(uint256) = constants.MAX_VALIDATORS
# the reveals that count in a column: at most c seat holders (c <= MAX_COMMITTEE) with committees, or
# every holder without them (chain.committee 0 permits at most this many validators, run_config.py)
MAX_DECIDERS: constant(uint256) = constants.MAX_COMMITTEE
MAX_SUMS: constant(uint256) = result_math.MAX_SUMS
HEADER_WORDS: constant(uint256) = constants.HEADER_WORDS
MAX_REPUTATION: constant(uint256) = 2**16 - 1

# kinds are numbered across the challenge contracts (2-4, 14: tree challenges, 5-10, 16: account challenges,
# 11-13, 15: claims challenges)
KIND_COLUMN: constant(uint256) = 1

# seats of each miner's check committee (the run config's chain.committee); 0: no committees
committee_size: public(immutable(uint256))


@deploy
def __init__(
    token_: IERC20, rounds_: IChainFacts, scores_: IVectorRoots, rewards_: IForfeits, results_: IResults,
    challenge_bond_: uint256, committee_size_: uint256,
):
    """
    @notice Binds the challenges to one settlement stack.
    @param token_ The token bonds are paid (and burned) in.
    @param rounds_ The rounds contract (commits, validators, weights, models).
    @param scores_ The scores contract (vector roots of the reveals).
    @param rewards_ The rewards contract (forfeits, emission, miner share).
    @param results_ The results contract (pending attempts, final roots, rejects).
    @param challenge_bond_ The bond a challenge posts.
    @param committee_size_ Seats of each miner's check committee; 0: every decider counts by stake.
    """
    assert committee_size_ <= constants.MAX_COMMITTEE, "challenges: committee too large"
    challenge_base.__init__(token_, rounds_, scores_, rewards_, results_, challenge_bond_)
    committee_size = committee_size_


@external
def challenge_column(
    round: uint256, header: bytes32[HEADER_WORDS], non_signers_hash: bytes32, posted_time: uint256, attempt: uint256,
    leaf: challenge_base.Column, sums: DynArray[uint256, MAX_SUMS], path: challenge_base.Path,
    root: challenge_base.Node, reveals: DynArray[challenge_base.DeciderReveal, MAX_DECIDERS],
):
    """
    @notice Disputes one column: recomputes its consensus, pay and credits from
            the reveals of the validators whose numbers count in it, and checks its miner (the `index`-th
            to commit) and, when it has no earlier entry, its reputation and
            cumulative.
    @param round The round.
    @param header The pending attempt's header words.
    @param non_signers_hash The pending attempt's non-signers hash.
    @param posted_time When the attempt was posted.
    @param attempt The attempt number.
    @param leaf The column leaf's fields.
    @param sums The column leaf's sums.
    @param path The leaf's inclusion path.
    @param root The tree root's preimage (its sums[0] is C); empty for an empty tree.
    @param reveals One reveal per validator that decides the column (nonzero column
           weight) and revealed, by ascending position in `validators_of`; no other.
    """
    challenge_base._open(round, header, non_signers_hash, posted_time, attempt)
    n: uint256 = challenge_base._commits(round)
    challenge_base._check_leaf(header[constants.H_TREE_ROOT], n, leaf.index, leaf, sums, path)
    vals: DynArray[address, MAX_VALIDATORS] = staticcall challenge_base.rounds.validators_of(round)
    root_sums: DynArray[uint256, MAX_SUMS] = challenge_base._root_sums(header[constants.H_TREE_ROOT], root, len(vals))
    upheld: bool = len(sums) != len(vals) + 2 or len(root_sums) != len(vals) + 2
    if not upheld:
        upheld = leaf.miner >= challenge_base.ADDRESS_BOUND or leaf.reputation > MAX_REPUTATION
    if not upheld:
        miner: address = convert(convert(leaf.miner, uint160), address)
        upheld = staticcall challenge_base.rounds.commit_index(round, miner) != leaf.index + 1
        if not upheld:
            upheld = not self._column_matches(round, n, vals, miner, leaf, sums, root_sums[0], reveals)
    challenge_base._settle(round, attempt, upheld, KIND_COLUMN)


@view
@internal
def _column_matches(
    round: uint256, n: uint256, vals: DynArray[address, MAX_VALIDATORS], miner: address,
    leaf: challenge_base.Column, sums: DynArray[uint256, MAX_SUMS], consensus_total: uint256,
    reveals: DynArray[challenge_base.DeciderReveal, MAX_DECIDERS],
) -> bool:
    """
    @dev Recomputes the column from chain data and the counted deciders' reveals
         (checked against their vector roots) and compares it, and the
         first-entry reputation and cumulative, with the leaf.
    """
    weights: DynArray[uint256, MAX_VALIDATORS] = challenge_base._weights(round, vals)
    revealed: DynArray[bool, MAX_VALIDATORS] = []
    forfeited: DynArray[bool, MAX_VALIDATORS] = []
    revealed_weight: uint256 = 0
    for j: uint256 in range(len(vals), bound=MAX_VALIDATORS):
        v: address = vals[j]
        is_revealed: bool = staticcall challenge_base.scores.vector_root(round, v) != empty(bytes32)
        if is_revealed:
            revealed_weight += weights[j]
        revealed.append(is_revealed)
        forfeited.append(staticcall challenge_base.rewards.forfeited(round, v))
    quorum: bool = revealed_weight > 0 and revealed_weight * 3 >= staticcall challenge_base.rounds.total_weight(round) * 2
    miner_pool: uint256 = 0
    validator_pool: uint256 = 0
    miner_pool, validator_pool = challenge_base._pools()
    consensus: uint16 = 0
    pay: uint256 = 0
    credits: DynArray[uint256, MAX_VALIDATORS] = []
    # each validator's weight in the column: its deciders (its class's holders, or everyone; a
    # forfeited one decides nothing) by stake, or its committee by seat, drawn from the round's seed
    staking: IStaking = IStaking(staticcall challenge_base.rounds.staking())
    deciders: DynArray[bool, MAX_VALIDATORS] = result_math._column_checkers(
        weights, staticcall staking.class_checkers(miner, vals), staticcall staking.min_class_stake()
    )
    seed: bytes32 = empty(bytes32)
    if committee_size != 0:
        seed = staticcall challenge_base.rounds.round_seed(round)
    column_weights: DynArray[uint256, MAX_VALIDATORS] = []
    decider_weight: uint256 = 0
    column_weights, decider_weight = committee_draw._column_weights(
        weights, deciders, revealed, forfeited, committee_size, seed, miner
    )
    column: DynArray[uint16, MAX_VALIDATORS] = self._counted_scores(round, n, vals, leaf.index, column_weights, revealed, reveals)
    consensus, pay, credits = result_math._column(
        column, column_weights, decider_weight, revealed, forfeited,
        quorum, staticcall challenge_base.rewards.forfeited(round, miner),
        consensus_total, miner_pool, validator_pool, n,
    )
    c: uint256 = convert(consensus, uint256)
    if sums[0] != c or sums[1] != pay:
        return False
    for j: uint256 in range(len(credits), bound=MAX_VALIDATORS):
        if sums[2 + j] != credits[j]:
            return False
    if leaf.prev == 0:
        # no earlier entry: the reference writes (prev, prev_index) = (0, 0)
        return leaf.reputation == c // 10 and leaf.cumulative == pay and leaf.prev_index == 0
    return not challenge_base._bad_prev(round, leaf.prev)


@view
@internal
def _counted_scores(
    round: uint256, n: uint256, vals: DynArray[address, MAX_VALIDATORS], index: uint256,
    column_weights: DynArray[uint256, MAX_VALIDATORS], revealed: DynArray[bool, MAX_VALIDATORS],
    reveals: DynArray[challenge_base.DeciderReveal, MAX_DECIDERS],
) -> DynArray[uint16, MAX_VALIDATORS]:
    """
    @dev Each validator's score of column `index`: from its reveal when its number
         counts (it decides the column and revealed), else 0 (never read). Reverts
         unless `reveals` holds exactly the counted ones, in position order, each
         matching its vector root.
    """
    # the column's segment, and how many a vector has
    k: uint256 = index // score_entries.SEGMENT_COLUMNS
    segment_count: uint256 = score_entries._segment_count(n)
    column: DynArray[uint16, MAX_VALIDATORS] = []
    taken: uint256 = 0
    for j: uint256 in range(len(vals), bound=MAX_VALIDATORS):
        score: uint16 = 0
        if column_weights[j] != 0 and revealed[j]:
            assert taken < len(reveals) and reveals[taken].position == j, "challenges: one reveal per counted decider, in order"
            r: challenge_base.DeciderReveal = reveals[taken]
            assert len(r.segment_hashes) == segment_count, "challenges: scores length"
            assert keccak256(r.segment) == r.segment_hashes[k], "challenges: segment does not match the reveal"
            assert challenge_base._revealed(round, vals[j], keccak256(abi_encode(r.segment_hashes)), r.witness_root, r.loss)
            score = score_entries._segment_score(r.segment, index)
            taken += 1
        column.append(score)
    assert taken == len(reveals), "challenges: a reveal whose number does not count"
    return column
