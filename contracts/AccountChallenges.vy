# pragma version ~=0.4.3
# SPDX-License-Identifier: AGPL-3.0-only
"""
@title veritrain account challenges: the header, history and validator entries
@custom:contract-name account_challenges
@license GNU Affero General Public License v3.0 only
@notice During a posted result's challenge window anyone may dispute here the
        header's words (`header_checks`), an account's history (a miner leaf's or validator entry's prev pointer,
        reputation and cumulative against its entry in an earlier final round,
        or a newer final entry its pointer skips), the validator entries
        (accounts, credits against the root's sums, first cumulatives). The
        contract recomputes the value (docs/PROTOCOL.md §11): a wrong one
        rejects the attempt through the results contract and returns the bond;
        a right one burns it. Columns are disputed in the column challenges
        contract, the tree's shape and its nodes in the tree challenges
        contract, the claims in the claims challenges contract.
"""

from ethereum.ercs import IERC20
from . import challenge_base
from . import constants
from . import header_checks
from . import result_math
from .interfaces import IChainFacts
from .interfaces import IForfeits
from .interfaces import IResults
from .interfaces import IVectorRoots

initializes: challenge_base
initializes: header_checks[challenge_base := challenge_base]

exports: (
    challenge_base.token,
    challenge_base.rounds,
    challenge_base.scores,
    challenge_base.rewards,
    challenge_base.results,
    challenge_base.challenge_bond,
    header_checks.challenge_header,
    header_checks.challenge_minted,
)

MAX_SUMS: constant(uint256) = result_math.MAX_SUMS
HEADER_WORDS: constant(uint256) = constants.HEADER_WORDS
MAX_REPUTATION: constant(uint256) = 2**16 - 1

# kinds are numbered across the challenge contracts (1: column challenges, 2-4, 14: tree challenges, 5, 16: header_checks,
# 11-13, 15: claims challenges)
KIND_MINER_HISTORY: constant(uint256) = 6
KIND_MINER_STALE: constant(uint256) = 7
KIND_VALIDATORS: constant(uint256) = 8
KIND_VALIDATOR_HISTORY: constant(uint256) = 9
KIND_VALIDATOR_STALE: constant(uint256) = 10


@deploy
def __init__(
    token_: IERC20, rounds_: IChainFacts, scores_: IVectorRoots, rewards_: IForfeits, results_: IResults,
    challenge_bond_: uint256,
):
    """
    @notice Binds the challenges to one settlement stack.
    @param token_ The token bonds are paid (and burned) in.
    @param rounds_ The rounds contract (commits, validators).
    @param scores_ The scores contract (unused here; kept for one constructor shape).
    @param rewards_ The rewards contract (unused here; kept for one constructor shape).
    @param results_ The results contract (pending attempts, final roots, rejects).
    @param challenge_bond_ The bond a challenge posts.
    """
    challenge_base.__init__(token_, rounds_, scores_, rewards_, results_, challenge_bond_)


@external
def challenge_miner_history(
    round: uint256, header: bytes32[HEADER_WORDS], non_signers_hash: bytes32, posted_time: uint256, attempt: uint256,
    leaf: challenge_base.Column, sums: DynArray[uint256, MAX_SUMS], path: challenge_base.Path,
    prev_header: bytes32[HEADER_WORDS], prev_leaf: challenge_base.Column, prev_sums: DynArray[uint256, MAX_SUMS],
    prev_path: challenge_base.Path,
):
    """
    @notice Disputes a miner leaf's link to its previous entry (prev != 0): the
            round it names must be earlier and final, hold this miner at
            prev_index, and give reputation = (9 rep_prev + c) // 10 and
            cumulative = cumulative_prev + pay.
    @param round The round.
    @param header The pending attempt's header words.
    @param non_signers_hash The pending attempt's non-signers hash.
    @param posted_time When the attempt was posted.
    @param attempt The attempt number.
    @param leaf The column leaf's fields.
    @param sums The column leaf's sums.
    @param path The leaf's inclusion path.
    @param prev_header The final header of round prev - 1 (ignored when it is not final or not earlier).
    @param prev_leaf The leaf at prev_index in that round (ignored when out of its range).
    @param prev_sums That leaf's sums.
    @param prev_path That leaf's inclusion path in that round's tree.
    """
    challenge_base._open(round, header, non_signers_hash, posted_time, attempt)
    challenge_base._check_leaf(header[constants.H_TREE_ROOT], challenge_base._commits(round), leaf.index, leaf, sums, path)
    assert leaf.prev != 0, "challenges: no previous entry"
    upheld: bool = challenge_base._bad_prev(round, leaf.prev)
    if not upheld:
        challenge_base._final_header(leaf.prev - 1, prev_header)
        prev_n: uint256 = convert(prev_header[constants.H_N], uint256)
        upheld = leaf.prev_index >= prev_n or len(sums) < 2 or sums[0] > MAX_REPUTATION
        if not upheld:
            challenge_base._check_leaf(prev_header[constants.H_TREE_ROOT], prev_n, leaf.prev_index, prev_leaf, prev_sums, prev_path)
            upheld = prev_leaf.miner != leaf.miner or not self._follows(
                leaf.cumulative, prev_leaf.cumulative, sums[1]
            ) or leaf.reputation != (9 * prev_leaf.reputation + sums[0]) // 10
    challenge_base._settle(round, attempt, upheld, KIND_MINER_HISTORY)


@external
def challenge_miner_stale(
    round: uint256, header: bytes32[HEADER_WORDS], non_signers_hash: bytes32, posted_time: uint256, attempt: uint256,
    leaf: challenge_base.Column, sums: DynArray[uint256, MAX_SUMS], path: challenge_base.Path,
    other_round: uint256, other_header: bytes32[HEADER_WORDS], other_position: uint256,
    other_leaf: challenge_base.Column, other_sums: DynArray[uint256, MAX_SUMS], other_path: challenge_base.Path,
):
    """
    @notice Disputes a miner leaf's prev pointer with a newer entry it skips: a
            leaf of the same miner in a final round between prev - 1 and this
            round (any earlier final round when prev = 0).
    @param round The round.
    @param header The pending attempt's header words.
    @param non_signers_hash The pending attempt's non-signers hash.
    @param posted_time When the attempt was posted.
    @param attempt The attempt number.
    @param leaf The column leaf's fields.
    @param sums The column leaf's sums.
    @param path The leaf's inclusion path.
    @param other_round The earlier final round holding the miner.
    @param other_header Its final header.
    @param other_position The miner's column there.
    @param other_leaf The miner's leaf there.
    @param other_sums That leaf's sums.
    @param other_path That leaf's inclusion path in that round's tree.
    """
    challenge_base._open(round, header, non_signers_hash, posted_time, attempt)
    challenge_base._check_leaf(header[constants.H_TREE_ROOT], challenge_base._commits(round), leaf.index, leaf, sums, path)
    assert other_round < round, "challenges: not an earlier round"
    challenge_base._final_header(other_round, other_header)
    challenge_base._check_leaf(
        other_header[constants.H_TREE_ROOT], convert(other_header[constants.H_N], uint256), other_position, other_leaf, other_sums, other_path
    )
    assert other_leaf.miner == leaf.miner, "challenges: another account"
    challenge_base._settle(round, attempt, leaf.prev == 0 or other_round > leaf.prev - 1, KIND_MINER_STALE)


@external
def challenge_validators(
    round: uint256, header: bytes32[HEADER_WORDS], non_signers_hash: bytes32, posted_time: uint256, attempt: uint256,
    at: challenge_base.EntryAt, root: challenge_base.Node,
):
    """
    @notice Disputes validator entry j (j below the round's validator count): it must name
            index j and the round validator at position j of `validators_of`, credit sums[2 + j]
            of the root, and have cumulative = credit and prev_index = 0 when it has no earlier
            entry, a prev pointer to an earlier final round when it has one. A root whose sums
            are not one per round validator after two is wrong too.
    @param round The round.
    @param header The pending attempt's header words.
    @param non_signers_hash The pending attempt's non-signers hash.
    @param posted_time When the attempt was posted.
    @param attempt The attempt number.
    @param at The disputed entry, its position and its inclusion path under validators_hash.
    @param root The tree root's preimage; empty for an empty tree.
    """
    challenge_base._open(round, header, non_signers_hash, posted_time, attempt)
    e: challenge_base.Entry = challenge_base._check_entry(round, header, at)
    j: uint256 = at.position
    v: uint256 = staticcall challenge_base.rounds.validator_count(round)
    root_sums: DynArray[uint256, MAX_SUMS] = challenge_base._root_sums(header[constants.H_TREE_ROOT], root, v)
    upheld: bool = len(root_sums) != v + 2
    if not upheld:
        validator: address = staticcall challenge_base.rounds.validator_at(round, j)
        upheld = e.index != j or e.account != convert(convert(validator, uint160), uint256) or e.credit != root_sums[2 + j]
        # no earlier entry: the reference writes (prev, prev_index) = (0, 0)
        upheld = upheld or (e.prev == 0 and (e.cumulative != e.credit or e.prev_index != 0))
        upheld = upheld or challenge_base._bad_prev(round, e.prev)
    challenge_base._settle(round, attempt, upheld, KIND_VALIDATORS)


@external
def challenge_validator_history(
    round: uint256, header: bytes32[HEADER_WORDS], non_signers_hash: bytes32, posted_time: uint256, attempt: uint256,
    at: challenge_base.EntryAt, prev_header: bytes32[HEADER_WORDS], prev_at: challenge_base.EntryAt,
):
    """
    @notice Disputes a validator entry's link to its previous entry (prev != 0):
            the round it names must be earlier and final, hold this validator
            at prev_index, and give cumulative = cumulative_prev + credit.
    @param round The round.
    @param header The pending attempt's header words.
    @param non_signers_hash The pending attempt's non-signers hash.
    @param posted_time When the attempt was posted.
    @param attempt The attempt number.
    @param at The disputed entry, its position and its inclusion path.
    @param prev_header The final header of round prev - 1 (ignored when it is not final or not earlier).
    @param prev_at The entry at prev_index there with its path (ignored when prev_index is past
           that round's validators).
    """
    challenge_base._open(round, header, non_signers_hash, posted_time, attempt)
    e: challenge_base.Entry = challenge_base._check_entry(round, header, at)
    assert e.prev != 0, "challenges: no previous entry"
    upheld: bool = challenge_base._bad_prev(round, e.prev)
    if not upheld:
        challenge_base._final_header(e.prev - 1, prev_header)
        upheld = e.prev_index >= staticcall challenge_base.rounds.validator_count(e.prev - 1)
        if not upheld:
            assert prev_at.position == e.prev_index, "challenges: not the entry the pointer names"
            p: challenge_base.Entry = challenge_base._check_entry(e.prev - 1, prev_header, prev_at)
            upheld = p.account != e.account or not self._follows(e.cumulative, p.cumulative, e.credit)
    challenge_base._settle(round, attempt, upheld, KIND_VALIDATOR_HISTORY)


@external
def challenge_validator_stale(
    round: uint256, header: bytes32[HEADER_WORDS], non_signers_hash: bytes32, posted_time: uint256, attempt: uint256,
    at: challenge_base.EntryAt, other_round: uint256, other_header: bytes32[HEADER_WORDS], other_at: challenge_base.EntryAt,
):
    """
    @notice Disputes a validator entry's prev pointer with a newer entry it
            skips: an entry of a final round between prev - 1 and this round
            (any earlier final round when prev = 0) for the same validator.
    @param round The round.
    @param header The pending attempt's header words.
    @param non_signers_hash The pending attempt's non-signers hash.
    @param posted_time When the attempt was posted.
    @param attempt The attempt number.
    @param at The disputed entry, its position and its inclusion path.
    @param other_round The earlier final round holding the validator.
    @param other_header Its final header.
    @param other_at The validator's entry there with its path.
    """
    challenge_base._open(round, header, non_signers_hash, posted_time, attempt)
    e: challenge_base.Entry = challenge_base._check_entry(round, header, at)
    assert other_round < round, "challenges: not an earlier round"
    challenge_base._final_header(other_round, other_header)
    other: challenge_base.Entry = challenge_base._check_entry(other_round, other_header, other_at)
    assert other.account == e.account, "challenges: another account"
    challenge_base._settle(round, attempt, e.prev == 0 or other_round > e.prev - 1, KIND_VALIDATOR_STALE)


@pure
@internal
def _follows(cumulative: uint256, prev_cumulative: uint256, earned: uint256) -> bool:
    """
    @dev cumulative == prev_cumulative + earned, without overflowing on a wrong tree's words.
    """
    return cumulative >= prev_cumulative and cumulative - prev_cumulative == earned
