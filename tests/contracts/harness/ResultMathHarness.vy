# pragma version ~=0.4.3
# SPDX-License-Identifier: AGPL-3.0-only
"""
@title result_math test harness
@notice Test only: the result_math module's functions as external views, so
        property tests call them without a transaction.
"""

from contracts import committee_draw
from contracts import entries_tree
from contracts import result_math
from contracts import score_entries

MAX_VALIDATORS: constant(uint256) = result_math.MAX_VALIDATORS
MAX_SUMS: constant(uint256) = result_math.MAX_SUMS
MAX_DEPTH: constant(uint256) = result_math.MAX_DEPTH
CLAIMS_CHUNK: constant(uint256) = result_math.CLAIMS_CHUNK
SEGMENT_BYTES: constant(uint256) = score_entries.SEGMENT_BYTES


@pure
@external
def weighted_median(scores: DynArray[uint16, MAX_VALIDATORS], weights: DynArray[uint256, MAX_VALIDATORS], revealed_weight: uint256) -> uint16:
    return result_math._weighted_median(scores, weights, revealed_weight)


@pure
@external
def is_lower_median(m: uint256, xs: DynArray[uint256, MAX_VALIDATORS]) -> bool:
    return result_math._is_lower_median(m, xs)


@pure
@external
def list_hash(xs: DynArray[uint256, MAX_SUMS]) -> bytes32:
    return result_math._list_hash(xs)


@pure
@external
def list_hash32(xs: DynArray[bytes32, CLAIMS_CHUNK]) -> bytes32:
    return result_math._list_hash32(xs)


@pure
@external
def node_hash(body: bytes32, sums: DynArray[uint256, MAX_SUMS]) -> bytes32:
    return result_math._node_hash(body, sums)


@pure
@external
def depth(n: uint256) -> uint256:
    return result_math._depth(n)


@pure
@external
def verify_path(
    node: bytes32, level: uint256, index: uint256, siblings: DynArray[bytes32, MAX_DEPTH],
    sums_hashes: DynArray[bytes32, MAX_DEPTH], depth: uint256, root: bytes32,
) -> bool:
    return result_math._verify_path(node, level, index, siblings, sums_hashes, depth, root)


@pure
@external
def claims_root(leaves: DynArray[bytes32, CLAIMS_CHUNK]) -> bytes32:
    return result_math._claims_root(leaves)


@pure
@external
def column_fields_hash(index: uint256, miner: uint256, reputation: uint256, cumulative: uint256, prev: uint256, prev_index: uint256) -> bytes32:
    return result_math._column_fields_hash(index, miner, reputation, cumulative, prev, prev_index)


@pure
@external
def entry_hash(index: uint256, account: uint256, credit: uint256, cumulative: uint256, prev: uint256, prev_index: uint256) -> bytes32:
    return entries_tree._entry_hash(index, account, credit, cumulative, prev, prev_index)


@pure
@external
def claim_leaf(account: uint256, amount: uint256) -> bytes32:
    return result_math._claim_leaf(account, amount)


@pure
@external
def segment_score(segment: Bytes[SEGMENT_BYTES], column: uint256) -> uint16:
    return score_entries._segment_score(segment, column)


@pure
@external
def columns(
    matrix: DynArray[DynArray[uint16, MAX_VALIDATORS], 16], weights: DynArray[uint256, MAX_VALIDATORS],
    revealed: DynArray[bool, MAX_VALIDATORS], forfeited: DynArray[bool, MAX_VALIDATORS],
    checkers: DynArray[DynArray[bool, MAX_VALIDATORS], 16], min_class_weight: uint256,
    quorum: bool, miners_forfeited: DynArray[bool, 16], consensus_total: uint256, miner_pool: uint256,
    validator_pool: uint256, committee_size: uint256, seed: bytes32, miners: DynArray[address, 16],
) -> DynArray[DynArray[uint256, MAX_SUMS], 16]:
    # every column's leaf sums [c, pay, credit_0..] in one call: matrix[i][j] = validator j's score of column i
    out: DynArray[DynArray[uint256, MAX_SUMS], 16] = []
    for i: uint256 in range(len(matrix), bound=16):
        deciders: DynArray[bool, MAX_VALIDATORS] = result_math._column_checkers(weights, checkers[i], min_class_weight)
        column_weights: DynArray[uint256, MAX_VALIDATORS] = []
        total: uint256 = 0
        column_weights, total = committee_draw._column_weights(weights, deciders, revealed, forfeited, committee_size, seed, miners[i])
        c: uint16 = 0
        pay: uint256 = 0
        credits: DynArray[uint256, MAX_VALIDATORS] = []
        c, pay, credits = result_math._column(matrix[i], column_weights, total, revealed, forfeited, quorum, miners_forfeited[i], consensus_total, miner_pool, validator_pool, len(matrix))
        sums: DynArray[uint256, MAX_SUMS] = [convert(c, uint256), pay]
        for x: uint256 in credits:
            sums.append(x)
        out.append(sums)
    return out


@pure
@external
def verify_entry(leaf: bytes32, position: uint256, siblings: DynArray[bytes32, MAX_DEPTH], v: uint256, root: bytes32) -> bool:
    return entries_tree._verify_entry(leaf, position, siblings, v, root)


@pure
@external
def entries_root(leaves: DynArray[bytes32, MAX_VALIDATORS]) -> bytes32:
    return entries_tree._root(leaves)


@pure
@external
def column_checkers(
    weights: DynArray[uint256, MAX_VALIDATORS], checkers: DynArray[bool, MAX_VALIDATORS], min_class_weight: uint256,
) -> DynArray[bool, MAX_VALIDATORS]:
    return result_math._column_checkers(weights, checkers, min_class_weight)

