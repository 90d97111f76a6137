# pragma version ~=0.4.3
# SPDX-License-Identifier: AGPL-3.0-only
"""
@title veritrain tree challenges: a result's sum-tree shape, its nodes and its header
@custom:contract-name tree_challenges
@license GNU Affero General Public License v3.0 only
@notice During a posted result's challenge window anyone may dispute the
        structure of its column sum tree here, posting the chain data it
        depends on: the tree's shape (a missing column or an extra leaf), one
        internal node's sums, a column leaf out of place, or the header's own
        words (n, quorum, held-out loss, minted, the model without quorum). The
        contract recomputes the value from the evidence (docs/PROTOCOL.md
        §11): a wrong one rejects the attempt through the results contract and
        returns the bond; a right one burns it. A column's values are disputed
        in the column challenges contract, account history and claims in the
        account challenges contract. Its leaves can be demanded here too
        (`tree_demands`): an unanswered demand rejects the attempt.
"""

from ethereum.ercs import IERC20
from . import challenge_base
from . import constants
from . import result_math
from . import tree_demands
from .interfaces import IChainFacts
from .interfaces import IForfeits
from .interfaces import IResults
from .interfaces import IVectorRoots

initializes: challenge_base
initializes: tree_demands[challenge_base := challenge_base]

exports: (
    challenge_base.token,
    challenge_base.rounds,
    challenge_base.scores,
    challenge_base.rewards,
    challenge_base.results,
    challenge_base.challenge_bond,
    tree_demands.demand_leaf,
    tree_demands.answer_leaf,
    tree_demands.answer_root,
    tree_demands.expire_demand,
    tree_demands.demands,
    tree_demands.demands_made,
)

MAX_VALIDATORS: constant(uint256) = constants.MAX_VALIDATORS
MAX_SUMS: constant(uint256) = result_math.MAX_SUMS
HEADER_WORDS: constant(uint256) = constants.HEADER_WORDS

# kinds are numbered across the challenge contracts (1: column challenges, 6-13: account challenges)
KIND_SHAPE: constant(uint256) = 2
KIND_NODE: constant(uint256) = 3
KIND_MISPLACED_LEAF: constant(uint256) = 4
KIND_HEADER: constant(uint256) = 5


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
    level: uint256, index: uint256, node: challenge_base.Node, path: challenge_base.Path,
    left_hash: bytes32, left: challenge_base.Node, right_hash: bytes32, right: challenge_base.Node,
):
    """
    @notice Disputes one node's sums: they must be the elementwise sums of its
            children's, a nonempty node must have a nonempty child, and every
            nonempty node has 2 + V sums. A leaf (level 0) whose body is a pair
            of hashes is wrong too: a leaf's body is a column's fields.
    @param round The round.
    @param header The pending attempt's header words.
    @param non_signers_hash The pending attempt's non-signers hash.
    @param posted_time When the attempt was posted.
    @param attempt The attempt number.
    @param level The node's level (0: leaves).
    @param index The node's index in its level.
    @param node The node's preimage; its body is H(enc(left_hash, right_hash)).
    @param path The node's inclusion path.
    @param left_hash The left child's hash (0: empty).
    @param left The left child's preimage (ignored when empty).
    @param right_hash The right child's hash (0: empty).
    @param right The right child's preimage (ignored when empty).
    """
    challenge_base._open(round, header, non_signers_hash, posted_time, attempt)
    n: uint256 = challenge_base._commits(round)
    assert result_math._verify_path(
        result_math._node_hash(node.body, node.sums), level, index, path.siblings, path.sums_hashes,
        result_math._depth(n), header[constants.H_TREE_ROOT],
    ), "challenges: node not in tree"
    assert node.body == keccak256(abi_encode(left_hash, right_hash)), "challenges: children do not match node"
    # a leaf whose body is a pair is wrong whatever the pair is
    upheld: bool = True
    if level > 0:
        if left_hash != empty(bytes32):
            assert result_math._node_hash(left.body, left.sums) == left_hash, "challenges: left preimage"
        if right_hash != empty(bytes32):
            assert result_math._node_hash(right.body, right.sums) == right_hash, "challenges: right preimage"
        width: uint256 = len(staticcall challenge_base.rounds.validators_of(round)) + 2
        upheld = self._sums_wrong(node.sums, left_hash, left.sums, right_hash, right.sums, width)
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


@external
def challenge_header(
    round: uint256, header: bytes32[HEADER_WORDS], non_signers_hash: bytes32, posted_time: uint256, attempt: uint256,
    root: challenge_base.Node, reveals: challenge_base.LightReveals,
):
    """
    @notice Disputes the header's own words: its domain, chain, results
            contract, run config and round; n (the round's commits); the
            quorum flag (3R >= 2W, R > 0); the held-out loss (lower median of the
            revealed losses); minted (the root's pay plus credits, at most the
            emission); the root's 2 + V sums; and, without quorum, the model
            (unchanged: the round's own).
    @param round The round.
    @param header The pending attempt's header words.
    @param non_signers_hash The pending attempt's non-signers hash.
    @param posted_time When the attempt was posted.
    @param attempt The attempt number.
    @param root The tree root's preimage; empty for an empty tree (and not read
           when an identity word, n, quorum, loss or the model is wrong).
    @param reveals One reveal per round validator (H(scores) for the scores).
    """
    challenge_base._open(round, header, non_signers_hash, posted_time, attempt)
    vals: DynArray[address, MAX_VALIDATORS] = staticcall challenge_base.rounds.validators_of(round)
    assert len(reveals.scores_hashes) == len(vals) and len(reveals.witness_roots) == len(vals) and len(reveals.losses) == len(vals), "challenges: one reveal per round validator"
    revealed_weight: uint256 = 0
    losses: DynArray[uint256, MAX_VALIDATORS] = []
    for j: uint256 in range(len(vals), bound=MAX_VALIDATORS):
        if challenge_base._revealed(round, vals[j], reveals.scores_hashes[j], reveals.witness_roots[j], reveals.losses[j]):
            revealed_weight += staticcall challenge_base.rounds.validator_weight(round, vals[j])
            losses.append(reveals.losses[j])
    quorum: bool = revealed_weight > 0 and revealed_weight * 3 >= staticcall challenge_base.rounds.total_weight(round) * 2
    upheld: bool = self._identity_wrong(round, header) or self._values_wrong(round, header, quorum, losses)
    if not upheld:
        # only minted needs the tree: the words above are disputed from chain data alone,
        # even when the signers keep their tree to themselves
        root_sums: DynArray[uint256, MAX_SUMS] = challenge_base._root_sums(header[constants.H_TREE_ROOT], root, len(vals))
        upheld = len(root_sums) != len(vals) + 2 or self._minted_wrong(header, root_sums)
    challenge_base._settle(round, attempt, upheld, KIND_HEADER)


@pure
@internal
def _sums_wrong(
    sums: DynArray[uint256, MAX_SUMS], left_hash: bytes32, left: DynArray[uint256, MAX_SUMS],
    right_hash: bytes32, right: DynArray[uint256, MAX_SUMS], width: uint256,
) -> bool:
    """
    @dev Whether an internal node's sums are not its children's (an empty child sums to 0).
    """
    if left_hash == empty(bytes32) and right_hash == empty(bytes32):
        return True  # a nonempty node over two empty children
    if len(sums) != width:
        return True
    if (left_hash != empty(bytes32) and len(left) != width) or (right_hash != empty(bytes32) and len(right) != width):
        return True
    for k: uint256 in range(width, bound=MAX_SUMS):
        a: uint256 = 0
        b: uint256 = 0
        if left_hash != empty(bytes32):
            a = left[k]
        if right_hash != empty(bytes32):
            b = right[k]
        # subtract rather than add: a wrong tree may hold sums that overflow
        if sums[k] < a or sums[k] - a != b:
            return True
    return False


@view
@internal
def _identity_wrong(round: uint256, header: bytes32[HEADER_WORDS]) -> bool:
    """
    @dev Whether the header names another domain, chain, results contract, run config or round.
    """
    return (
        header[constants.H_TAG] != constants.RESULT_TAG
        or convert(header[constants.H_CHAIN_ID], uint256) != chain.id
        or convert(header[constants.H_RESULTS], uint256) != convert(convert(challenge_base.results.address, uint160), uint256)
        or header[constants.H_RUN_CONFIG] != staticcall challenge_base.rounds.run_config_hash()
        or convert(header[constants.H_ROUND], uint256) != round
    )


@view
@internal
def _values_wrong(round: uint256, header: bytes32[HEADER_WORDS], quorum: bool, losses: DynArray[uint256, MAX_VALIDATORS]) -> bool:
    """
    @dev Whether n, the quorum flag, the held-out loss or (without quorum) the model is wrong.
    """
    flag: uint256 = 0
    if quorum:
        flag = 1
    if convert(header[constants.H_N], uint256) != challenge_base._commits(round):
        return True
    if convert(header[constants.H_QUORUM], uint256) != flag:
        return True
    if convert(header[constants.H_LOSS], uint256) != result_math._lower_median(losses):
        return True
    return not quorum and header[constants.H_MODEL] != staticcall challenge_base.rounds.model_hash(round)


@view
@internal
def _minted_wrong(header: bytes32[HEADER_WORDS], root_sums: DynArray[uint256, MAX_SUMS]) -> bool:
    """
    @dev Whether minted is not the root's pay plus every credit, or exceeds the emission.
    """
    minted: uint256 = convert(header[constants.H_MINTED], uint256)
    if minted > staticcall challenge_base.rewards.emission_per_round():
        return True
    remaining: uint256 = minted
    for k: uint256 in range(1, MAX_SUMS):
        if k >= len(root_sums):
            break
        # subtract rather than add: a wrong root may hold sums that overflow
        if root_sums[k] > remaining:
            return True
        remaining -= root_sums[k]
    return remaining != 0
