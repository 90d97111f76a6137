# pragma version ~=0.4.3
# SPDX-License-Identifier: AGPL-3.0-only
"""
@title veritrain score entries: a sparse score vector, cut into segments
@custom:contract-name score_entries
@license GNU Affero General Public License v3.0 only
@notice Pure functions (docs/PROTOCOL.md §11.1; the reference is
        protocol/core/settlement/score_vector.py). A revealed vector lists only the
        miners a validator scored nonzero, which with committees are its seats
        (about 2c n / v of them), so a reveal grows with a validator's work, not with
        the network. It comes as one segment per SEGMENT_COLUMNS columns, each a list
        of 4-byte entries, a column (uint16) then its score (uint16), big-endian.
        Column i's score is that of the first whole entry naming i in segment
        i / SEGMENT_COLUMNS, 0 when none does: nothing else is checked, so a reveal
        costs no loop over its entries (a node packs them ascending, one per nonzero score).
"""

from . import constants

ENTRY_BYTES: constant(uint256) = constants.ENTRY_BYTES
SEGMENT_COLUMNS: constant(uint256) = constants.SEGMENT_COLUMNS
SEGMENT_BYTES: constant(uint256) = constants.SEGMENT_BYTES
SCORE_MASK: constant(uint256) = 2**16 - 1


@pure
@internal
def _segment_count(columns: uint256) -> uint256:
    """
    @dev The segments of a vector over `columns` miners.
    """
    return (columns + SEGMENT_COLUMNS - 1) // SEGMENT_COLUMNS


@pure
@internal
def _segment_score(segment: Bytes[SEGMENT_BYTES], column: uint256) -> uint16:
    """
    @dev `column`'s score in the segment that holds it: the first whole entry naming it, else 0.
    """
    for e: uint256 in range(len(segment) // ENTRY_BYTES, bound=SEGMENT_COLUMNS):
        word: uint256 = convert(convert(slice(segment, ENTRY_BYTES * e, ENTRY_BYTES), bytes4), uint256)
        if word >> 16 == column:
            return convert(word & SCORE_MASK, uint16)
    return 0
