# pragma version ~=0.4.3
# pragma optimize codesize
# (codesize: the demands and their answers fill most of the 60 % of EIP-170 a contract may take at 1,024 validators)
# SPDX-License-Identifier: AGPL-3.0-only
"""
@title veritrain tree challenges: a result's sum-tree shape and its nodes, and its parts on demand
@custom:contract-name tree_challenges
@license GNU Affero General Public License v3.0 only
@notice During a posted result's challenge window anyone may dispute the
        structure of its column sum tree here, posting the chain data it
        depends on: the tree's shape (a missing column or an extra leaf), one
        internal node's sums, or a column leaf out of place. The contract
        recomputes the value from the evidence (docs/PROTOCOL.md §11): a wrong
        one rejects the attempt through the results contract and returns the
        bond; a right one burns it. A column's values are disputed in the column
        challenges contract, the header's words, account history and claims in
        the account challenges contract. The parts of the attempt a
        challenge needs (a column leaf, the root's preimage, the validator
        entries, the claims chunks) can be demanded here (`result_demands`): an
        unanswered demand rejects the attempt.
"""

from ethereum.ercs import IERC20
from . import challenge_base
from . import constants
from . import demand_book
from . import result_math
from . import result_demands
from .interfaces import IChainFacts
from .interfaces import IForfeits
from .interfaces import IResults
from .interfaces import IVectorRoots

initializes: challenge_base
initializes: demand_book[challenge_base := challenge_base]
initializes: result_demands[challenge_base := challenge_base, demand_book := demand_book]

exports: (
    challenge_base.token,
    challenge_base.rounds,
    challenge_base.scores,
    challenge_base.rewards,
    challenge_base.results,
    challenge_base.challenge_bond,
    result_demands.demand,
    result_demands.answer_validators,
    result_demands.answer_claims,
    result_demands.answer_claims_chunk,
    result_demands.answer_leaf,
    result_demands.answer_root,
    result_demands.expire_demand,
    result_demands.settle_demand,
    demand_book.demands,
    demand_book.demands_made,
)

MAX_VALIDATORS: constant(uint256) = constants.MAX_VALIDATORS
MAX_SUMS: constant(uint256) = result_math.MAX_SUMS
HEADER_WORDS: constant(uint256) = constants.HEADER_WORDS

# kinds are numbered across the challenge contracts (1: column challenges, 5-10, 16: account challenges,
# 11-13, 15: claims challenges)
KIND_SHAPE: constant(uint256) = 2
KIND_NODE: constant(uint256) = 3
KIND_MISPLACED_LEAF: constant(uint256) = 4


@deploy
def __init__(
    token_: IERC20, rounds_: IChainFacts, scores_: IVectorRoots, rewards_: IForfeits, results_: IResults,
    challenge_bond_: uint256,
):
    """
    @notice Binds the challenges to one settlement stack.
    @param token_ The token bonds are paid (and burned) in.
    @param rounds_ The rounds contract (commits, validators, weights, models).
    @param scores_ The scores contract (vector roots of the reveals).
    @param rewards_ The rewards contract (forfeits, emission, miner share).
    @param results_ The results contract (pending attempts, final roots, rejects).
    @param challenge_bond_ The bond a challenge posts.
    """
    challenge_base.__init__(token_, rounds_, scores_, rewards_, results_, challenge_bond_)


@external
def challenge_shape(
    round: uint256, header: bytes32[HEADER_WORDS], non_signers_hash: bytes32, posted_time: uint256, attempt: uint256,
    level: uint256, index: uint256, node: bytes32, path: challenge_base.Path,
):
    """
    @notice Disputes the tree's shape at one node: an empty node (hash 0) that
            covers a column < n (a missing column), or a nonempty one whose
            first column is >= n (an extra leaf).
    @param round The round.
    @param header The pending attempt's header words.
    @param non_signers_hash The pending attempt's non-signers hash.
    @param posted_time When the attempt was posted.
    @param attempt The attempt number.
    @param level The node's level (0: leaves).
    @param index The node's index in its level.
    @param node The node's hash.
    @param path The node's inclusion path.
    """
    challenge_base._open(round, header, non_signers_hash, posted_time, attempt)
    n: uint256 = challenge_base._commits(round)
    assert result_math._verify_path(
        node, level, index, path.siblings, path.sums_hashes, result_math._depth(n), header[constants.H_TREE_ROOT]
    ), "challenges: node not in tree"
    first: uint256 = index << level
    upheld: bool = False
    if node == empty(bytes32):
        upheld = first < n
    else:
        upheld = first >= n
    challenge_base._settle(round, attempt, upheld, KIND_SHAPE)


@external
def challenge_node(
    round: uint256, header: bytes32[HEADER_WORDS], non_signers_hash: bytes32, posted_time: uint256, attempt: uint256,
    level: uint256, index: uint256, body: bytes32, sums_hash: bytes32, path: challenge_base.Path,
    left_hash: bytes32, left: challenge_base.Node, right_hash: bytes32, right: challenge_base.Node,
):
    """
    @notice Disputes one node's sums: they must be the elementwise sums of its
            children's, a nonempty node must have a nonempty child, and every
            nonempty node has 2 + V sums. A leaf (level 0) whose body is a pair
            of hashes is wrong too: a leaf's body is a column's fields. The node
            is given by its body and the hash of its sums (its hash is
            H(enc(body, sums_hash))), so a challenger that has only seen its
            hash on a path, and its children, can dispute it.
    @param round The round.
    @param header The pending attempt's header words.
    @param non_signers_hash The pending attempt's non-signers hash.
    @param posted_time When the attempt was posted.
    @param attempt The attempt number.
    @param level The node's level (0: leaves).
    @param index The node's index in its level.
    @param body The node's body, H(enc(left_hash, right_hash)).
    @param sums_hash The hash of the node's sums, list_hash(sums).
    @param path The node's inclusion path.
    @param left_hash The left child's hash (0: empty).
    @param left The left child's preimage (ignored when empty).
    @param right_hash The right child's hash (0: empty).
    @param right The right child's preimage (ignored when empty).
    """
    challenge_base._open(round, header, non_signers_hash, posted_time, attempt)
    n: uint256 = challenge_base._commits(round)
    assert result_math._verify_path(
        keccak256(abi_encode(body, sums_hash)), level, index, path.siblings, path.sums_hashes,
        result_math._depth(n), header[constants.H_TREE_ROOT],
    ), "challenges: node not in tree"
    assert body == keccak256(abi_encode(left_hash, right_hash)), "challenges: children do not match node"
    # a leaf whose body is a pair is wrong whatever the pair is
    upheld: bool = True
    if level > 0:
        if left_hash != empty(bytes32):
            assert result_math._node_hash(left.body, left.sums) == left_hash, "challenges: left preimage"
        if right_hash != empty(bytes32):
            assert result_math._node_hash(right.body, right.sums) == right_hash, "challenges: right preimage"
        width: uint256 = len(staticcall challenge_base.rounds.validators_of(round)) + 2
        upheld = self._sums_wrong(sums_hash, left_hash, left.sums, right_hash, right.sums, width)
    challenge_base._settle(round, attempt, upheld, KIND_NODE)


@external
def challenge_misplaced_leaf(
    round: uint256, header: bytes32[HEADER_WORDS], non_signers_hash: bytes32, posted_time: uint256, attempt: uint256,
    level: uint256, index: uint256, leaf: challenge_base.Column, sums: DynArray[uint256, MAX_SUMS],
    path: challenge_base.Path,
):
    """
    @notice Disputes a node whose body is a column's fields but which is not
            that column's leaf: one above the leaves (level >= 1; its subtree's
            columns have no path) or a leaf whose index field is not its position.
    @param round The round.
    @param header The pending attempt's header words.
    @param non_signers_hash The pending attempt's non-signers hash.
    @param posted_time When the attempt was posted.
    @param attempt The attempt number.
    @param level The node's level.
    @param index The node's index in its level.
    @param leaf The fields its body hashes.
    @param sums Its sums.
    @param path Its inclusion path.
    """
    challenge_base._open(round, header, non_signers_hash, posted_time, attempt)
    n: uint256 = challenge_base._commits(round)
    assert result_math._verify_path(
        challenge_base._leaf_hash(leaf, sums), level, index, path.siblings, path.sums_hashes,
        result_math._depth(n), header[constants.H_TREE_ROOT],
    ), "challenges: node not in tree"
    challenge_base._settle(round, attempt, level > 0 or leaf.index != index, KIND_MISPLACED_LEAF)


@pure
@internal
def _sums_wrong(
    sums_hash: bytes32, left_hash: bytes32, left: DynArray[uint256, MAX_SUMS],
    right_hash: bytes32, right: DynArray[uint256, MAX_SUMS], width: uint256,
) -> bool:
    """
    @dev Whether an internal node's sums (by their hash) are not its children's
         2 + V elementwise sums (an empty child sums to 0).
    """
    if left_hash == empty(bytes32) and right_hash == empty(bytes32):
        return True  # a nonempty node over two empty children
    if (left_hash != empty(bytes32) and len(left) != width) or (right_hash != empty(bytes32) and len(right) != width):
        return True  # a child is wrong, and so is its parent: no width's sums can match
    sums: DynArray[uint256, MAX_SUMS] = []
    for k: uint256 in range(width, bound=MAX_SUMS):
        a: uint256 = 0
        b: uint256 = 0
        if left_hash != empty(bytes32):
            a = left[k]
        if right_hash != empty(bytes32):
            b = right[k]
        if a > max_value(uint256) - b:
            return True  # a wrong tree's children may overflow: no parent holds their sum
        sums.append(a + b)
    return result_math._list_hash(sums) != sums_hash
