# pragma version ~=0.4.3
# SPDX-License-Identifier: AGPL-3.0-only
"""
@title veritrain check committees: who decides a column, and by how much
@custom:contract-name committee_draw
@license GNU Affero General Public License v3.0 only
@notice Pure functions (docs/PROTOCOL.md §10.8; the reference is
        protocol/core/settlement/committees.py and column_weights.py). Without
        committees a column is decided by its deciders (the holders of the
        miner's class, or everyone) by stake. With a committee of `size` seats,
        seat s of a miner falls to the decider whose slice of the deciders'
        cumulative stake holds keccak256(DOMAIN ++ seed ++ miner ++ s) mod W;
        seats 0 .. 2 size - 1 are drawn and the committee is the first `size`
        of them whose validator revealed; each member counts by its seats, out
        of `size`.
"""

from . import constants

MAX_VALIDATORS: constant(uint256) = constants.MAX_VALIDATORS
MAX_COMMITTEE: constant(uint256) = constants.MAX_COMMITTEE
DOMAIN: constant(Bytes[22]) = b"veritrain/committee/v1"


@pure
@internal
def _column_weights(
    weights: DynArray[uint256, MAX_VALIDATORS], deciders: DynArray[bool, MAX_VALIDATORS], revealed: DynArray[bool, MAX_VALIDATORS],
    forfeited: DynArray[bool, MAX_VALIDATORS], size: uint256, seed: bytes32, miner: address,
) -> (DynArray[uint256, MAX_VALIDATORS], uint256):
    """
    @dev Each validator's weight in the column and the column's total: the
         deciders' (`deciders[j]`) stakes out of their sum when no more
         of them hold stake than `size` (0: no committees), else their committee
         seats out of `size`. A forfeited validator
         decides nothing: it leaves the deciders, or its seats pass to backups
         (it stays in the draw, so the other seats fall where the checkers saw).
    """
    kept: DynArray[uint256, MAX_VALIDATORS] = []
    cumulative: DynArray[uint256, MAX_VALIDATORS] = []
    total: uint256 = 0
    kept_total: uint256 = 0
    count: uint256 = 0
    for j: uint256 in range(len(weights), bound=MAX_VALIDATORS):
        w: uint256 = 0
        if deciders[j] and weights[j] != 0:
            w = weights[j]
            count += 1
        total += w
        cumulative.append(total)
        if forfeited[j]:
            w = 0
        kept.append(w)
        kept_total += w
    # a committee decides only when more deciders hold stake than it has seats
    if size == 0 or count <= size:
        return kept, kept_total
    seats: DynArray[uint256, MAX_VALIDATORS] = []
    for j: uint256 in range(len(weights), bound=MAX_VALIDATORS):
        seats.append(0)
    filled: uint256 = 0
    for s: uint256 in range(2 * size, bound=2 * MAX_COMMITTEE):
        point: uint256 = convert(keccak256(concat(DOMAIN, seed, convert(miner, bytes20), convert(s, bytes32))), uint256) % total
        holder: uint256 = 0
        for j: uint256 in range(len(cumulative), bound=MAX_VALIDATORS):
            if point < cumulative[j]:
                holder = j
                break
        if revealed[holder] and not forfeited[holder]:
            seats[holder] += 1
            filled += 1
            if filled == size:
                break
    return seats, size
