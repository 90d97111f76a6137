# pragma version ~=0.4.3
# SPDX-License-Identifier: AGPL-3.0-only
"""
@title veritrain validator entries: their hash and their tree by position
@custom:contract-name entries_tree
@license GNU Affero General Public License v3.0 only
@notice A round result's validator entries (docs/PROTOCOL.md §11, validator entries) are the
        leaves of a Merkle tree by position: entry j is leaf j of d = ceil(log2 v) levels,
        padded with zero leaves, each node keccak256(left ‖ right). A challenge carries the
        entry it disputes with its d siblings, so it grows with log v, not with v. Pure.
"""

from . import constants
from . import result_math

MAX_VALIDATORS: constant(uint256) = constants.MAX_VALIDATORS
MAX_DEPTH: constant(uint256) = result_math.MAX_DEPTH
VALIDATOR_TAG: constant(bytes32) = keccak256("veritrain/validator/v1")


@pure
@internal
def _entry_hash(
    index: uint256, account: uint256, credit: uint256, cumulative: uint256, prev: uint256, prev_index: uint256,
) -> bytes32:
    """
    @dev A validator entry's hash, a leaf of the tree. Words, not typed values: a challenge must
         be able to name whatever a wrong root committed to.
    """
    return keccak256(abi_encode(VALIDATOR_TAG, index, account, credit, cumulative, prev, prev_index))


@pure
@internal
def _verify_entry(leaf: bytes32, position: uint256, siblings: DynArray[bytes32, MAX_DEPTH], v: uint256, root: bytes32) -> bool:
    """
    @dev Whether `leaf` is entry `position` < `v` of the tree under `root`.
    """
    if position >= v or len(siblings) != result_math._depth(v):
        return False
    current: bytes32 = leaf
    for k: uint256 in range(len(siblings), bound=MAX_DEPTH):
        if (position >> k) & 1 == 0:
            current = keccak256(concat(current, siblings[k]))
        else:
            current = keccak256(concat(siblings[k], current))
    return current == root


@pure
@internal
def _root(leaves: DynArray[bytes32, MAX_VALIDATORS]) -> bytes32:
    """
    @dev The root over `leaves` (zero for none): pad to a power of two with zero leaves and hash
         pairs level by level, in place.
    """
    v: uint256 = len(leaves)
    if v == 0:
        return empty(bytes32)
    width: uint256 = 1 << result_math._depth(v)
    level: DynArray[bytes32, MAX_VALIDATORS] = leaves
    for _: uint256 in range(width - v, bound=MAX_VALIDATORS):
        level.append(empty(bytes32))
    for _: uint256 in range(MAX_DEPTH):
        if width == 1:
            break
        width = width // 2
        for k: uint256 in range(width, bound=MAX_VALIDATORS // 2):
            level[k] = keccak256(concat(level[2 * k], level[2 * k + 1]))
    return level[0]
