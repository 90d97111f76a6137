# pragma version ~=0.4.3
# pragma evm-version prague
# SPDX-License-Identifier: AGPL-3.0-only
"""
@title veritrain permit log: the permitted validators, their weights and keys, by version
@custom:contract-name permit_log
@license GNU Affero General Public License v3.0 only
@notice A module of the BLS key registry. Staking reports every change to the permitted
        set as it happens (`_note`); the registry adds each member's key. Every value is
        kept as a log of (version, value) entries, so a round that opens only takes the
        current version (`_freeze`) and reads any value as it stood then: opening a
        round costs the same at 1 validator or MAX_VALIDATORS, and each change costs
        its sender a few slots (docs/PROTOCOL.md §11, validator snapshot).
"""

from . import bls
from . import constants

MAX_VALIDATORS: constant(uint256) = constants.MAX_VALIDATORS
INDEX_SHIFT: constant(uint256) = constants.MEMBER_INDEX_SHIFT
KEY_SHIFT: constant(uint256) = constants.MEMBER_KEY_SHIFT
MASK16: constant(uint256) = 2**16 - 1
MASK96: constant(uint256) = 2**96 - 1
# a weight is capped so that the weights of all MAX_VALIDATORS fit in 96 bits
WEIGHT_CAP: constant(uint256) = MASK96 // MAX_VALIDATORS
# a log entry: its version in the top 40 bits, its value (< 2**216) below
VERSION_SHIFT: constant(uint256) = 216
VALUE_MASK: constant(uint256) = 2**216 - 1
# log ids: a member's record under its address; slot i's holder, the totals and the
# aggregate key above every address
SLOT_LOG: constant(uint256) = 2**160
TOTALS_LOG: constant(uint256) = 2**161
AGGREGATE_LOG: constant(uint256) = 2**161 + 1
# totals: the member count in the low 16 bits, the total weight in the next 96, the keyed
# weight (members whose key the aggregate holds) in the 96 above
TOTAL_SHIFT: constant(uint256) = 16
KEYED_SHIFT: constant(uint256) = 112

# the version changes are written at; a round that opens takes it and moves it on
version: public(uint256)
entries: HashMap[uint256, HashMap[uint256, uint256]]
entry_count: HashMap[uint256, uint256]
# the aggregate key of each aggregate log entry: (x, y) without EIP-2537's 16 zero bytes
aggregate_words: HashMap[uint256, bytes32[3]]


@deploy
def __init__():
    self.version = 1


@internal
def _freeze() -> uint256:
    """
    @dev The current version, from now on read-only: later changes go to the next.
    """
    frozen: uint256 = self.version
    self.version = frozen + 1
    return frozen


@internal
def _note(account: address, slot: uint256, stake: uint256, key_hash: bytes32, key: Bytes[128]):
    """
    @dev Records that `account` holds permit slot `slot` with `stake` (0: it holds none
         any more), with its key when it has one, and keeps the totals and the aggregate
         key in step. A no-op when nothing changed.
    """
    old: uint256 = self._latest(convert(account, uint256))
    new: uint256 = 0
    if stake > 0:
        new = min(stake, WEIGHT_CAP) | (slot << INDEX_SHIFT) | ((convert(key_hash, uint256) >> constants.MEMBER_KEY_DROP) << KEY_SHIFT)
    if new == old:
        return
    self._push(convert(account, uint256), new)
    if new != 0 and (old == 0 or (old >> INDEX_SHIFT) & MASK16 != slot):
        self._push(SLOT_LOG + slot, convert(account, uint256))
    self._move_totals(old, new)
    if old >> KEY_SHIFT != new >> KEY_SHIFT:
        self._move_aggregate(new == 0, key)


@internal
def _move_totals(old: uint256, new: uint256):
    """
    @dev Replaces member record `old` by `new` (either may be 0) in the totals.
    """
    totals: uint256 = self._latest(TOTALS_LOG)
    count: uint256 = totals & MASK16
    total: uint256 = (totals >> TOTAL_SHIFT) & MASK96
    keyed: uint256 = totals >> KEYED_SHIFT
    if old == 0:
        count += 1
    if new == 0:
        count -= 1
    total = total + (new & MASK96) - (old & MASK96)
    if old >> KEY_SHIFT != 0:
        keyed -= old & MASK96
    if new >> KEY_SHIFT != 0:
        keyed += new & MASK96
    self._push(TOTALS_LOG, count | (total << TOTAL_SHIFT) | (keyed << KEYED_SHIFT))


@internal
def _move_aggregate(leaves: bool, key: Bytes[128]):
    """
    @dev Adds `key` to the aggregate (a keyed member joins, or a member's key arrives)
         or takes it out (a keyed member leaves). A key never changes once registered.
    """
    point: Bytes[128] = key
    if leaves:
        point = bls._g1_neg(key)
    total: Bytes[128] = bls._g1_add(self._aggregate_at(self.version), point)
    k: uint256 = self._push(AGGREGATE_LOG, 0)
    xy: Bytes[96] = concat(slice(total, 16, 48), slice(total, 80, 48))
    self.aggregate_words[k] = [extract32(xy, 0), extract32(xy, 32), extract32(xy, 64)]


@internal
def _push(log_id: uint256, entry: uint256) -> uint256:
    """
    @dev Writes `entry` as of the current version: over the log's last entry when that
         one is of the current version too, else as a new entry. Returns its position.
    """
    n: uint256 = self.entry_count[log_id]
    word: uint256 = (self.version << VERSION_SHIFT) | entry
    if n > 0 and self.entries[log_id][n - 1] >> VERSION_SHIFT == self.version:
        self.entries[log_id][n - 1] = word
        return n - 1
    self.entries[log_id][n] = word
    self.entry_count[log_id] = n + 1
    return n


@view
@internal
def _latest(log_id: uint256) -> uint256:
    """
    @dev The log's current value (0 when it has none).
    """
    n: uint256 = self.entry_count[log_id]
    if n == 0:
        return 0
    return self.entries[log_id][n - 1] & VALUE_MASK


@view
@internal
def _position_at(log_id: uint256, at: uint256) -> (bool, uint256):
    """
    @dev The position of the log's last entry of version `at` or before (binary search:
         a round is read long after later changes), and whether there is one.
    """
    n: uint256 = self.entry_count[log_id]
    if n == 0:
        return False, 0
    if self.entries[log_id][n - 1] >> VERSION_SHIFT <= at:
        return True, n - 1
    low: uint256 = 0
    high: uint256 = n - 1  # entries[high] is after `at`; find the first such
    for _i: uint256 in range(64):
        if low >= high:
            break
        mid: uint256 = (low + high) // 2
        if self.entries[log_id][mid] >> VERSION_SHIFT <= at:
            low = mid + 1
        else:
            high = mid
    if low == 0:
        return False, 0
    return True, low - 1


@view
@internal
def _value_at(log_id: uint256, at: uint256) -> uint256:
    """
    @dev The log's value as of version `at` (0 when it had none).
    """
    found: bool = False
    k: uint256 = 0
    found, k = self._position_at(log_id, at)
    if not found:
        return 0
    return self.entries[log_id][k] & VALUE_MASK


@view
@internal
def _record_at(at: uint256, account: address) -> uint256:
    """
    @dev `account`'s member record as of version `at` (0: no permit then).
    """
    return self._value_at(convert(account, uint256), at)


@view
@internal
def _totals_at(at: uint256) -> (uint256, uint256, uint256):
    """
    @dev The member count, total weight and keyed weight as of version `at`.
    """
    totals: uint256 = self._value_at(TOTALS_LOG, at)
    return totals & MASK16, (totals >> TOTAL_SHIFT) & MASK96, totals >> KEYED_SHIFT


@view
@internal
def _members_at(at: uint256) -> DynArray[address, MAX_VALIDATORS]:
    """
    @dev The permitted validators as of version `at`, by slot.
    """
    count: uint256 = self._value_at(TOTALS_LOG, at) & MASK16
    out: DynArray[address, MAX_VALIDATORS] = []
    for i: uint256 in range(count, bound=MAX_VALIDATORS):
        out.append(self._slot_at(at, i))
    return out


@view
@internal
def _slot_at(at: uint256, slot: uint256) -> address:
    """
    @dev The validator holding permit slot `slot` as of version `at` (empty: none).
    """
    return convert(convert(self._value_at(SLOT_LOG + slot, at), uint160), address)


@view
@internal
def _packed_aggregate_at(at: uint256) -> bytes32[3]:
    """
    @dev The aggregate key as of version `at`, as three words (all zero: no key).
    """
    found: bool = False
    k: uint256 = 0
    found, k = self._position_at(AGGREGATE_LOG, at)
    if not found:
        return empty(bytes32[3])
    return self.aggregate_words[k]


@view
@internal
def _aggregate_at(at: uint256) -> Bytes[128]:
    """
    @dev The aggregate key as of version `at` in the EIP-2537 layout.
    """
    w: bytes32[3] = self._packed_aggregate_at(at)
    xy: Bytes[96] = concat(w[0], w[1], w[2])
    return concat(empty(bytes16), slice(xy, 0, 48), empty(bytes16), slice(xy, 48, 48))
