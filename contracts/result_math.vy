# pragma version ~=0.4.3
# SPDX-License-Identifier: AGPL-3.0-only
"""
@title veritrain result math: the round result, recomputed piece by piece
@custom:contract-name result_math
@license GNU Affero General Public License v3.0 only
@notice Pure functions of the round result (docs/PROTOCOL.md §11): one column's
        consensus, pay and validator credits (the result function), the positional
        sum tree's node hashes and inclusion paths (column sum tree), the field
        hash of a column leaf, the OpenZeppelin-compatible
        claims tree and the check of the held-out losses' lower median. The
        challenge contracts use them to recompute one disputed value from chain
        data; nothing here reads state.
"""

from . import constants

# a column per committed miner
MAX_COLUMNS: constant(uint256) = constants.MAX_MINERS
MAX_VALIDATORS: constant(uint256) = constants.MAX_VALIDATORS
# a node's sums: consensus, pay, then one credit per round validator
MAX_SUMS: constant(uint256) = 2 + MAX_VALIDATORS
# ceil(log2(MAX_COLUMNS)): the longest inclusion path
MAX_DEPTH: constant(uint256) = 14
# every miner leaf and every validator entry has one claim
MAX_CLAIMS: constant(uint256) = MAX_COLUMNS + MAX_VALIDATORS
# the claims list is committed in chunks of this many (a power of two: a chunk's tree is a node
# of the whole tree), so a challenge carries one chunk, not the list (PROTOCOL §11.6)
CLAIMS_CHUNK: constant(uint256) = 512
MAX_CHUNKS: constant(uint256) = (MAX_CLAIMS + CLAIMS_CHUNK - 1) // CLAIMS_CHUNK
# per chunk, its list hash and its tree's root
MAX_SUMMARY: constant(uint256) = 2 * MAX_CHUNKS
ONE: constant(uint256) = constants.ONE

COLUMN_TAG: constant(bytes32) = keccak256("veritrain/column/v1")


@pure
@internal
def _weighted_median(
    scores: DynArray[uint16, MAX_VALIDATORS], weights: DynArray[uint256, MAX_VALIDATORS], out_of: uint256,
) -> uint16:
    """
    @dev The largest score x with 2 * (weight of the scores >= x) > `out_of`; 0 when
         none. The caller passes the revealed validators' scores and the whole
         deciders' weight as `out_of`, revealed or not: no coalition of at most half of
         it moves a score, whoever else is offline.
    """
    best: uint16 = 0
    for x: uint16 in scores:
        # support only shrinks as x grows: a candidate at or below the best cannot win
        if x <= best:
            continue
        support: uint256 = 0
        for j: uint256 in range(len(scores), bound=MAX_VALIDATORS):
            if scores[j] >= x:
                support += weights[j]
        # strict: exactly half the weight is not a majority
        if support * 2 > out_of:
            best = x
    return best


@pure
@internal
def _agreement(score: uint16, consensus: uint16) -> uint256:
    """
    @dev min/max of a score and the consensus in 1e18 fixed point (ONE when both are 0).
    """
    hi: uint256 = convert(max(score, consensus), uint256)
    if hi == 0:
        return ONE
    return ONE * convert(min(score, consensus), uint256) // hi


@pure
@internal
def _column_checkers(
    weights: DynArray[uint256, MAX_VALIDATORS], checkers: DynArray[bool, MAX_VALIDATORS], min_class_weight: uint256,
) -> DynArray[bool, MAX_VALIDATORS]:
    """
    @dev The validators that decide a column (PROTOCOL §11, the result function): those holding its miner's class
         (`checkers[j]`) when their weight reaches `min_class_weight` and 2/3 of
         the round's (the class is covered: deciding it takes over 1/3 of all stake),
         else every validator (tolerance mode). One flag per validator, so any count fits.
    """
    covered: uint256 = 0
    total: uint256 = 0
    everyone: DynArray[bool, MAX_VALIDATORS] = []
    for j: uint256 in range(len(weights), bound=MAX_VALIDATORS):
        total += weights[j]
        everyone.append(True)
        if checkers[j]:
            covered += weights[j]
    if covered > 0 and covered >= min_class_weight and covered * 3 >= total * 2:
        return checkers
    return everyone


@pure
@internal
def _column(
    scores: DynArray[uint16, MAX_VALIDATORS], column_weights: DynArray[uint256, MAX_VALIDATORS], decider_weight: uint256,
    revealed: DynArray[bool, MAX_VALIDATORS], forfeited: DynArray[bool, MAX_VALIDATORS],
    quorum: bool, miner_forfeited: bool, consensus_total: uint256, miner_pool: uint256,
    validator_pool: uint256, n: uint256,
) -> (uint16, uint256, DynArray[uint256, MAX_VALIDATORS]):
    """
    @dev One column (PROTOCOL §11, the result function): its consensus, its miner's pay and each round validator's
         credit. `scores[j]` is validator j's score of the column (ignored when j did
         not reveal or does not decide the column), `column_weights[j]` its weight in
         the column (committee_draw._column_weights: stake among the deciders, or
         committee seats; 0 when it does not decide), `decider_weight` the column's
         total, `consensus_total` is C (the root's sums[0]), `n` > 0. The column
         needs the round's quorum and its own: at least 2/3 of `decider_weight` revealed.
    """
    revealed_scores: DynArray[uint16, MAX_VALIDATORS] = []
    revealed_weights: DynArray[uint256, MAX_VALIDATORS] = []
    revealed_weight: uint256 = 0
    for j: uint256 in range(len(column_weights), bound=MAX_VALIDATORS):
        if column_weights[j] != 0 and revealed[j]:
            revealed_scores.append(scores[j])
            revealed_weights.append(column_weights[j])
            revealed_weight += column_weights[j]
    column_quorum: bool = quorum and revealed_weight > 0 and revealed_weight * 3 >= decider_weight * 2
    consensus: uint16 = 0
    if column_quorum and not miner_forfeited:
        consensus = self._weighted_median(revealed_scores, revealed_weights, decider_weight)
    pay: uint256 = 0
    if consensus_total > 0:
        pay = miner_pool * convert(consensus, uint256) // consensus_total
    # agreement-weighted shares of this column's slice of the validator pool, among its deciders
    shares: DynArray[uint256, MAX_VALIDATORS] = []
    total_share: uint256 = 0
    for j: uint256 in range(len(column_weights), bound=MAX_VALIDATORS):
        agreement: uint256 = 0
        if revealed[j] and not forfeited[j] and column_weights[j] != 0:
            agreement = ONE
            if column_quorum:
                agreement = self._agreement(scores[j], consensus)
        shares.append(column_weights[j] * agreement)
        total_share += column_weights[j] * agreement
    column_pool: uint256 = validator_pool // n
    credits: DynArray[uint256, MAX_VALIDATORS] = []
    for share: uint256 in shares:
        credit: uint256 = 0
        if total_share > 0:
            credit = column_pool * share // total_share
        credits.append(credit)
    return consensus, pay, credits


@pure
@internal
def _is_lower_median(m: uint256, xs: DynArray[uint256, MAX_VALIDATORS]) -> bool:
    """
    @dev Whether `m` is element t = (k - 1) // 2 of `xs` sorted ascending (k = len(xs); 0 when
         empty): at most t elements are below m and more than t at or below it. One pass, so the
         check costs O(k) whatever the order (a sort would cost O(k^2) on adversarial losses).
    """
    k: uint256 = len(xs)
    if k == 0:
        return m == 0
    t: uint256 = (k - 1) // 2
    below: uint256 = 0
    at_or_below: uint256 = 0
    for x: uint256 in xs:
        if x < m:
            below += 1
        if x <= m:
            at_or_below += 1
    return below <= t and t < at_or_below


@pure
@internal
def _list_hash(xs: DynArray[uint256, MAX_SUMS]) -> bytes32:
    """
    @dev keccak256(abi_encode(xs)) of a list of words (a node's sums).
    """
    return keccak256(abi_encode(xs))


@pure
@internal
def _list_hash32(xs: DynArray[bytes32, CLAIMS_CHUNK]) -> bytes32:
    """
    @dev keccak256(abi_encode(xs)) of a list of hashes (a claims chunk, the chunk summaries).
    """
    return keccak256(abi_encode(xs))


@pure
@internal
def _node_hash(body: bytes32, sums: DynArray[uint256, MAX_SUMS]) -> bytes32:
    """
    @dev H(enc(body, list_hash(sums))): body is a leaf's fields hash or H(enc(left, right)).
    """
    return keccak256(abi_encode(body, self._list_hash(sums)))


@pure
@internal
def _depth(n: uint256) -> uint256:
    """
    @dev ceil(log2(n)), 0 for n <= 1: the levels above the leaves.
    """
    d: uint256 = 0
    for _: uint256 in range(MAX_DEPTH + 1):
        if (1 << d) >= n:
            break
        d += 1
    return d


@pure
@internal
def _verify_path(
    node: bytes32, level: uint256, index: uint256, siblings: DynArray[bytes32, MAX_DEPTH],
    sums_hashes: DynArray[bytes32, MAX_DEPTH], depth: uint256, root: bytes32,
) -> bool:
    """
    @dev Whether the node at (`level`, `index`) hashes up to `root`: one (sibling
         hash, parent sums hash) per level from `level` to `depth` - 1. Two empty
         children make an empty parent, so an empty node's path is a proof too.
    """
    if level > depth or index >> (depth - level) != 0:
        return False
    if len(siblings) != depth - level or len(sums_hashes) != depth - level:
        return False
    current: bytes32 = node
    p: uint256 = index
    for k: uint256 in range(len(siblings), bound=MAX_DEPTH):
        sibling: bytes32 = siblings[k]
        if current == empty(bytes32) and sibling == empty(bytes32):
            current = empty(bytes32)
        elif p & 1 == 0:
            current = keccak256(abi_encode(keccak256(abi_encode(current, sibling)), sums_hashes[k]))
        else:
            current = keccak256(abi_encode(keccak256(abi_encode(sibling, current)), sums_hashes[k]))
        p = p >> 1
    return current == root


@pure
@internal
def _hash_pair(a: bytes32, b: bytes32) -> bytes32:
    """
    @dev OpenZeppelin's commutative pair hash: the smaller word first.
    """
    if convert(a, uint256) < convert(b, uint256):
        return keccak256(concat(a, b))
    return keccak256(concat(b, a))


@pure
@internal
def _claims_root(leaves: DynArray[bytes32, CLAIMS_CHUNK]) -> bytes32:
    """
    @dev The claims tree (PROTOCOL §11) of a chunk, or of the chunks' roots: pair up each level
         left to right, promote an odd last node; one leaf is its own root, no leaf gives 0.
    """
    m: uint256 = len(leaves)
    if m == 0:
        return empty(bytes32)
    level: DynArray[bytes32, CLAIMS_CHUNK] = leaves
    # log2(CLAIMS_CHUNK) = 9 levels at most
    for _: uint256 in range(9):
        if m == 1:
            break
        for k: uint256 in range(m // 2, bound=CLAIMS_CHUNK // 2):
            level[k] = self._hash_pair(level[2 * k], level[2 * k + 1])
        if m % 2 == 1:
            level[m // 2] = level[m - 1]
        m = (m + 1) // 2
    return level[0]


@pure
@internal
def _column_fields_hash(
    index: uint256, miner: uint256, reputation: uint256, cumulative: uint256, prev: uint256, prev_index: uint256,
) -> bytes32:
    """
    @dev A column leaf's body (PROTOCOL §11, column sum tree). Words, not typed values: a challenge must be
         able to name whatever a wrong root committed to.
    """
    return keccak256(abi_encode(COLUMN_TAG, index, miner, reputation, cumulative, prev, prev_index))


@pure
@internal
def _claim_leaf(account: uint256, amount: uint256) -> bytes32:
    """
    @dev OpenZeppelin's standard leaf: H(H(enc(account, amount))).
    """
    return keccak256(keccak256(abi_encode(account, amount)))


@pure
@internal
def _vector_root(
    chain_id: uint256, scores_contract: address, validator: address, round: uint256,
    scores_hash: bytes32, witness_root: bytes32, heldout_loss: uint256,
) -> bytes32:
    """
    @dev What the scores contract stores for a reveal (PROTOCOL §11, score vectors).
    """
    return keccak256(abi_encode(constants.VECTOR_TAG, chain_id, scores_contract, validator, round, scores_hash, witness_root, heldout_loss))
