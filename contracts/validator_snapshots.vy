# pragma version ~=0.4.3
# SPDX-License-Identifier: AGPL-3.0-only
"""
@title veritrain validator snapshots: each round's permitted validators, stakes and keys
@custom:contract-name validator_snapshots
@license GNU Affero General Public License v3.0 only
@notice A module of the rounds contract. A round points at a frozen version of the
        permitted set that the key registry logs (`BlsKeys.freeze`, kept in the round
        clock's phase word), so opening a round copies nothing. A result post reads its
        signers' weights and keys through here, and which of them revealed in the round
        (docs/PROTOCOL.md §11, BLS certificate).
"""

from . import constants
from . import round_clock
from .interfaces import IBlsKeys

uses: round_clock

MAX_VALIDATORS: constant(uint256) = constants.MAX_VALIDATORS
INDEX_SHIFT: constant(uint256) = constants.MEMBER_INDEX_SHIFT
KEY_SHIFT: constant(uint256) = constants.MEMBER_KEY_SHIFT
MASK16: constant(uint256) = 2**16 - 1
MASK96: constant(uint256) = 2**96 - 1

# keeps the permitted set's log (named once, by `Rounds.wire`)
keys: public(IBlsKeys)
# per round, one slot a result post reads: the revealed weight of members whose keys the
# aggregate holds in bits 64-159, and the round's total weight in bits 160-255 (copied by
# the first reveal)
revealed_word: HashMap[uint256, uint256]
# per round, bit i % 256 of word i // 256 set when member i revealed
revealed_members: HashMap[uint256, HashMap[uint256, uint256]]


@internal
def _take() -> uint256:
    """
    @dev Freezes the permitted set's current version for a round that opens: its
         number is the round's snapshot. Nothing is copied, whatever the set's size.
    """
    return extcall self.keys.freeze()


@view
@internal
def _record(round: uint256, validator: address) -> uint256:
    """
    @dev `validator`'s member record in `round` (0: no permit).
    """
    return staticcall self.keys.member_at(round_clock._snapshot(round), validator)


@view
@internal
def _revealed_member(round: uint256, position: uint256) -> bool:
    """
    @dev Whether member `position` of `round` revealed.
    """
    return (self.revealed_members[round][position >> 8] >> (position & 255)) & 1 == 1


@internal
def _record_reveal(round: uint256, validator: address):
    """
    @dev Marks `validator` revealed in `round` and adds its weight when the round's
         aggregate holds its key. The caller reveals each validator once, and only one
         that committed scores (so was permitted).
    """
    record: uint256 = self._record(round, validator)
    word: uint256 = self.revealed_word[round]
    if word == 0:
        word = self._totals(round)[1] << 160
    position: uint256 = (record >> INDEX_SHIFT) & MASK16
    self.revealed_members[round][position >> 8] |= 1 << (position & 255)
    if record >> KEY_SHIFT != 0:
        word += (record & MASK96) << 64
    self.revealed_word[round] = word


@view
@external
def validators_of(round: uint256) -> DynArray[address, MAX_VALIDATORS]:
    """
    @notice The permitted validators of `round`, as they stood when it opened.
    @param round The round.
    @return The validators, by position (their permit slots).
    """
    return staticcall self.keys.members_at(round_clock._snapshot(round))


@view
@external
def validator_at(round: uint256, position: uint256) -> address:
    """
    @notice The permitted validator at `position` of `round`, as `validators_of` lists it.
    @param round The round.
    @param position The position (from 0).
    @return The validator; empty past the round's count.
    """
    if position >= self._totals(round)[0]:
        return empty(address)
    return staticcall self.keys.member_in_slot(round_clock._snapshot(round), position)


@view
@external
def validator_count(round: uint256) -> uint256:
    """
    @notice The number of permitted validators of `round`.
    @param round The round.
    @return The count.
    """
    return self._totals(round)[0]


@view
@external
def snapshot_of(round: uint256) -> uint256:
    """
    @notice The version of the permitted set `round` opened on (`BlsKeys.member_at`).
    @param round The round.
    @return The version (0: not opened).
    """
    return round_clock._snapshot(round)


@view
@external
def validator_weight(round: uint256, validator: address) -> uint256:
    """
    @notice The stake `validator` held when `round` opened, if it held a permit (else 0).
    @param round The round.
    @param validator The account.
    @return Its weight in the round.
    """
    return self._record(round, validator) & MASK96


@view
@external
def member_record(round: uint256, validator: address) -> uint256:
    """
    @notice `validator`'s member record in `round` (`BlsKeys.member_at`): weight, position
            and key hash; its key hash is nonzero when the round's aggregate holds its key.
    @param round The round.
    @param validator The account.
    @return The record (0: no permit).
    """
    return self._record(round, validator)


@view
@external
def signing_facts(round: uint256, non_signers: DynArray[address, MAX_VALIDATORS]) -> (DynArray[uint256, MAX_VALIDATORS], bytes32[3], uint256, uint256):
    """
    @notice What a result post checks, in one call, after checking that `non_signers`
            are distinct permitted validators in strictly ascending order: their member
            records (`member_record`), the round's aggregate BLS key (x and y without
            EIP-2537's zero padding: 96 bytes, all zero for the point at infinity), the
            signers' weight and the weight they need more than 2/3 of. When the keyed
            validators that revealed hold at least 2/3 of the round's stake, the signers
            are the revealed keyed validators less the revealed non-signers, out of their
            stake R (an absent validator cannot stop a round, one that never revealed
            cannot make up a certificate); otherwise all keyed validators less the keyed
            non-signers, out of the total stake.
    @param round The round.
    @param non_signers The post's non-signers, strictly ascending.
    @return Records, aggregate key, signers' weight, base weight.
    """
    snapshot: uint256 = round_clock._snapshot(round)
    records: DynArray[uint256, MAX_VALIDATORS] = staticcall self.keys.records_at(snapshot, non_signers)
    word: uint256 = self.revealed_word[round]
    signers: uint256 = (word >> 64) & MASK96
    base: uint256 = signers
    everyone: bool = signers == 0 or signers * 3 < (word >> 160) * 2
    if everyone:
        count: uint256 = 0
        count, base, signers = self._totals(round)
    previous: uint256 = 0
    for i: uint256 in range(len(non_signers), bound=MAX_VALIDATORS):
        assert convert(non_signers[i], uint256) > previous, "results: non-signers not strictly ascending"
        previous = convert(non_signers[i], uint256)
        assert records[i] & MASK96 > 0, "results: non-signer not a permitted validator"
        # a validator whose key the aggregate lacks never signs; with the quorum, one that did
        # not reveal is not in the measure either
        if records[i] >> KEY_SHIFT != 0 and (everyone or self._revealed_member(round, (records[i] >> INDEX_SHIFT) & MASK16)):
            signers -= records[i] & MASK96
    return records, staticcall self.keys.aggregate_at(snapshot), signers, base


@view
@external
def total_weight(round: uint256) -> uint256:
    """
    @notice The stake of all permitted validators of `round`.
    @param round The round.
    @return The total weight.
    """
    return self._totals(round)[1]


@view
@external
def weights_of(round: uint256, accounts: DynArray[address, MAX_VALIDATORS]) -> DynArray[uint256, MAX_VALIDATORS]:
    """
    @notice The snapshotted weights of `accounts` in `round`, in the same order.
    @param round The round.
    @param accounts Validators (0 for an account without a permit).
    @return One weight per account.
    """
    records: DynArray[uint256, MAX_VALIDATORS] = staticcall self.keys.records_at(round_clock._snapshot(round), accounts)
    out: DynArray[uint256, MAX_VALIDATORS] = []
    for r: uint256 in records:
        out.append(r & MASK96)
    return out


@view
@internal
def _totals(round: uint256) -> (uint256, uint256, uint256):
    """
    @dev The round's member count, total weight and keyed weight.
    """
    return staticcall self.keys.totals_at(round_clock._snapshot(round))
