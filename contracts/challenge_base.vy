# pragma version ~=0.4.3
# SPDX-License-Identifier: AGPL-3.0-only
"""
@title veritrain challenge base: the pending attempt, the bond and the evidence checks
@custom:contract-name challenge_base
@license GNU Affero General Public License v3.0 only
@notice State and checks the three challenge contracts share (docs/PROTOCOL.md §11, Challenges): which
        attempt a challenge is against and whether its window is open, the bond
        (taken up front, returned when the challenge is upheld, burned when the
        disputed value was right), and the checks that tie evidence to the
        posted root and to chain data. A check of evidence reverts with
        "challenges: ..."; a wrong value is not a revert but an upheld challenge.
"""

from ethereum.ercs import IERC20
from . import constants
from . import entries_tree
from . import result_math
from .interfaces import IChainFacts
from .interfaces import IForfeits
from .interfaces import IResults
from .interfaces import IToken
from .interfaces import IVectorRoots

MAX_VALIDATORS: constant(uint256) = result_math.MAX_VALIDATORS
MAX_SUMS: constant(uint256) = result_math.MAX_SUMS
MAX_DEPTH: constant(uint256) = result_math.MAX_DEPTH
SEGMENT_BYTES: constant(uint256) = constants.SEGMENT_BYTES
MAX_SEGMENTS: constant(uint256) = constants.MAX_SEGMENTS
BPS: constant(uint256) = constants.BPS
ADDRESS_BOUND: constant(uint256) = 2**160
HEADER_WORDS: constant(uint256) = constants.HEADER_WORDS


# a column leaf's fields (PROTOCOL §11, column sum tree), as raw words: a wrong root may commit to any word
struct Column:
    index: uint256
    miner: uint256
    reputation: uint256
    cumulative: uint256
    prev: uint256
    prev_index: uint256

# a validator entry's fields (PROTOCOL §11, validator entries), as raw words
struct Entry:
    index: uint256
    account: uint256
    credit: uint256
    cumulative: uint256
    prev: uint256
    prev_index: uint256

# validator entry `position` of a result with its inclusion path (PROTOCOL §11, validator entries)
struct EntryAt:
    position: uint256
    entry: Entry
    siblings: DynArray[bytes32, MAX_DEPTH]

# a sum-tree node's preimage: node_hash(body, sums)
struct Node:
    body: bytes32
    sums: DynArray[uint256, MAX_SUMS]

# an inclusion path (PROTOCOL §11, column sum tree): one (sibling hash, parent sums hash) per level
struct Path:
    siblings: DynArray[bytes32, MAX_DEPTH]
    sums_hashes: DynArray[bytes32, MAX_DEPTH]

# the reveal of a validator whose number counts in the challenged column (it decides the column
# and revealed), cut to the column: its position in validators_of, the segment of its score
# entries holding the column, the hashes of all its segments, its witness root and held-out loss
# (with the segment hashes, what its vector root binds)
struct DeciderReveal:
    position: uint256
    segment: Bytes[SEGMENT_BYTES]
    segment_hashes: DynArray[bytes32, MAX_SEGMENTS]
    witness_root: bytes32
    loss: uint256

# the same with the scores hash in place of the scores (enough for the vector root)
struct LightReveals:
    scores_hashes: DynArray[bytes32, MAX_VALIDATORS]
    witness_roots: DynArray[bytes32, MAX_VALIDATORS]
    losses: DynArray[uint256, MAX_VALIDATORS]


token: public(immutable(IERC20))
rounds: public(immutable(IChainFacts))
scores: public(immutable(IVectorRoots))
rewards: public(immutable(IForfeits))
results: public(immutable(IResults))
challenge_bond: public(immutable(uint256))


event ChallengeUpheld:
    round: indexed(uint256)
    attempt: uint256
    challenger: indexed(address)
    kind: uint256

event ChallengeFailed:
    round: indexed(uint256)
    attempt: uint256
    challenger: indexed(address)
    kind: uint256


@deploy
def __init__(
    token_: IERC20, rounds_: IChainFacts, scores_: IVectorRoots, rewards_: IForfeits, results_: IResults,
    challenge_bond_: uint256,
):
    """
    @dev Binds the stack; every challenge contract calls this from its constructor.
    """
    assert challenge_bond_ > 0, "challenges: zero bond"
    token = token_
    rounds = rounds_
    scores = scores_
    rewards = rewards_
    results = results_
    challenge_bond = challenge_bond_


@internal
def _open(round: uint256, header: bytes32[HEADER_WORDS], non_signers_hash: bytes32, posted_time: uint256, attempt: uint256):
    """
    @dev Checks that `header` is the round's pending attempt and its window is
         open, then takes the bond.
    """
    result_root: bytes32 = keccak256(abi_encode(header))
    pending: bytes32 = staticcall results.commitment_of(result_root, non_signers_hash, posted_time, attempt)
    assert pending != empty(bytes32) and staticcall results.pending(round) == pending, "challenges: not the pending attempt"
    assert block.timestamp < posted_time + staticcall results.challenge_window(), "challenges: window closed"
    assert extcall token.transferFrom(msg.sender, self, challenge_bond, default_return_value=True), "challenges: bond transfer failed"


@internal
def _settle(round: uint256, attempt: uint256, upheld: bool, kind: uint256):
    """
    @dev A wrong value rejects the attempt and returns the bond; a right one burns it.
    """
    if upheld:
        extcall results.reject(round, msg.sender)
        assert extcall token.transfer(msg.sender, challenge_bond, default_return_value=True), "challenges: bond refund failed"
        log ChallengeUpheld(round=round, attempt=attempt, challenger=msg.sender, kind=kind)
    else:
        extcall IToken(token.address).burn(challenge_bond)
        log ChallengeFailed(round=round, attempt=attempt, challenger=msg.sender, kind=kind)


@view
@internal
def _commits(round: uint256) -> uint256:
    """
    @dev n: the round's commits, the number of columns.
    """
    start: uint256 = 0
    commits: uint256 = 0
    active: uint256 = 0
    closed_block: uint256 = 0
    closed_time: uint256 = 0
    seed: bytes32 = empty(bytes32)
    start, commits, active, closed_block, closed_time, seed = staticcall rounds.round_info(round)
    return commits


@view
@internal
def _claims_total(round: uint256) -> uint256:
    """
    @dev n + v: the length of the round's claims list (a claim per miner, then per validator).
    """
    return self._commits(round) + staticcall rounds.validator_count(round)


@pure
@internal
def _leaf_hash(leaf: Column, sums: DynArray[uint256, MAX_SUMS]) -> bytes32:
    """
    @dev A column leaf's node hash.
    """
    return result_math._node_hash(
        result_math._column_fields_hash(leaf.index, leaf.miner, leaf.reputation, leaf.cumulative, leaf.prev, leaf.prev_index),
        sums,
    )


@pure
@internal
def _check_leaf(tree_root: bytes32, n: uint256, position: uint256, leaf: Column, sums: DynArray[uint256, MAX_SUMS], path: Path):
    """
    @dev Reverts unless `leaf` is the column at `position` < `n` of the tree under `tree_root`.
    """
    assert position < n, "challenges: column out of range"
    assert result_math._verify_path(
        self._leaf_hash(leaf, sums), 0, position, path.siblings, path.sums_hashes, result_math._depth(n), tree_root
    ), "challenges: leaf not in tree"


@pure
@internal
def _root_sums(tree_root: bytes32, root: Node, validators: uint256) -> DynArray[uint256, MAX_SUMS]:
    """
    @dev The root's sums, proven by its preimage; an empty tree (n = 0) has none
         and its sums are 2 + V zeros.
    """
    if tree_root == empty(bytes32):
        assert root.body == empty(bytes32) and len(root.sums) == 0, "challenges: an empty tree has no preimage"
        zeros: DynArray[uint256, MAX_SUMS] = []
        for _: uint256 in range(validators + 2, bound=MAX_SUMS):
            zeros.append(0)
        return zeros
    assert result_math._node_hash(root.body, root.sums) == tree_root, "challenges: root preimage"
    return root.sums


@pure
@internal
def _entry_leaf(e: Entry) -> bytes32:
    """
    @dev A validator entry's leaf in its round's entries tree.
    """
    return entries_tree._entry_hash(e.index, e.account, e.credit, e.cumulative, e.prev, e.prev_index)


@view
@internal
def _final_header(round: uint256, header: bytes32[HEADER_WORDS]):
    """
    @dev Reverts unless `header` is the final result of `round`.
    """
    final: bytes32 = staticcall results.final_root(round)
    assert final != empty(bytes32), "challenges: round not final"
    assert keccak256(abi_encode(header)) == final, "challenges: not the final header"


@view
@internal
def _bad_prev(round: uint256, prev: uint256) -> bool:
    """
    @dev Whether a prev pointer names a round that cannot hold the previous
         entry: not earlier than `round`, or not final.
    """
    if prev == 0:
        return False
    return prev - 1 >= round or staticcall results.final_root(prev - 1) == empty(bytes32)


@view
@internal
def _weights(round: uint256, vals: DynArray[address, MAX_VALIDATORS]) -> DynArray[uint256, MAX_VALIDATORS]:
    """
    @dev The round validators' snapshot weights.
    """
    return staticcall rounds.weights_of(round, vals)


@view
@internal
def _pools() -> (uint256, uint256):
    """
    @dev (P_m, P_v): the miners' and the validators' parts of the emission.
    """
    emission: uint256 = staticcall rewards.emission_per_round()
    miner_pool: uint256 = emission * staticcall rewards.miner_share_bps() // BPS
    return miner_pool, emission - miner_pool


@view
@internal
def _revealed(
    round: uint256, v: address, scores_hash: bytes32, witness_root: bytes32, loss: uint256,
) -> bool:
    """
    @dev Whether `v` revealed; reverts when it did and the evidence is not its reveal.
    """
    root: bytes32 = staticcall scores.vector_root(round, v)
    if root == empty(bytes32):
        return False
    assert result_math._vector_root(chain.id, scores.address, v, round, scores_hash, witness_root, loss) == root, "challenges: reveal does not match vector root"
    return True


@view
@internal
def _check_entry(round: uint256, header: bytes32[HEADER_WORDS], at: EntryAt) -> Entry:
    """
    @dev Reverts unless `at` is an entry, below the round's validator count, of the entries tree
         `header` commits to; returns the entry.
    """
    v: uint256 = staticcall rounds.validator_count(round)
    assert at.position < v, "challenges: entry out of range"
    assert entries_tree._verify_entry(
        self._entry_leaf(at.entry), at.position, at.siblings, v, header[constants.H_VALIDATORS]
    ), "challenges: entry not in validators_hash"
    return at.entry
