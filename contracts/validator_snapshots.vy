# pragma version ~=0.4.3
# SPDX-License-Identifier: AGPL-3.0-only
"""
@title veritrain validator snapshots: each round's permitted validators, stakes and keys
@custom:contract-name validator_snapshots
@license GNU Affero General Public License v3.0 only
@notice A module of the rounds contract. A round points at a snapshot of its permitted
        validators (by number, from 1, in the round clock's phase word), stored once per
        distinct (validators, stakes, key set): a round whose set did not change writes
        nothing for it. A result post reads its signers' weights and keys here, and which
        of them revealed in the round (docs/PROTOCOL.md §11, BLS certificate).
"""

from . import constants
from . import round_clock
from .interfaces import IBlsKeys

uses: round_clock

MAX_VALIDATORS: constant(uint256) = constants.MAX_VALIDATORS
MASK96: constant(uint256) = 2**96 - 1
MASK128: constant(uint256) = 2**128 - 1
# a weight is capped so that the weights of all MAX_VALIDATORS fit in 96 bits
WEIGHT_CAP: constant(uint256) = MASK96 // MAX_VALIDATORS
INDEX_SHIFT: constant(uint256) = 96
KEY_SHIFT: constant(uint256) = 104

# caches each set's aggregate BLS key (named once, by `Rounds.wire`)
keys: public(IBlsKeys)
snapshot_count: public(uint256)
snapshot_number: HashMap[bytes32, uint256]
snapshot_validators: HashMap[uint256, DynArray[address, MAX_VALIDATORS]]
# per member, one slot a result post reads: its weight (stake, capped at WEIGHT_CAP) in the
# low 96 bits, its index in the snapshot in the next 8, and the top 152 bits of keccak256 of
# its BLS key when the snapshot's aggregate holds that key (else 0) in the high ones
snapshot_member: HashMap[uint256, HashMap[address, uint256]]
# per round, one slot a result post reads instead of the snapshot's weights: the revealed
# weight of members whose keys the aggregate holds in bits 64-159, and the round's total
# weight in bits 160-255 (copied by the first reveal)
revealed_word: HashMap[uint256, uint256]
# per round, bit i set when member i revealed (MAX_VALIDATORS bits)
revealed_members: HashMap[uint256, uint256]
# the total weight in the low 128 bits, the keyed weight (below) in the high ones
snapshot_weights: HashMap[uint256, uint256]
# the key of the snapshot's cached aggregate BLS key, and that key (a result post reads it
# here, in the contract it already called); keyed weight: the stake of the validators whose
# keys it holds (only they can sign a round's result)
snapshot_key_set: HashMap[uint256, bytes32]
# (x, y) without EIP-2537's 16 zero bytes before each: 96 bytes, three slots
snapshot_aggregate: HashMap[uint256, bytes32[3]]


@internal
def _take(addrs: DynArray[address, MAX_VALIDATORS], stakes: DynArray[uint256, MAX_VALIDATORS]) -> uint256:
    """
    @dev The number of the snapshot of these validators, their stakes and their keys;
         stored first if it is new. The aggregate BLS key of the set is computed once
         per distinct set and cached by the keys contract.
    """
    set_hash: bytes32 = empty(bytes32)
    mask: uint256 = 0
    set_hash, mask = extcall self.keys.cache_aggregate(addrs)
    content: bytes32 = keccak256(abi_encode(addrs, stakes, set_hash))
    snapshot: uint256 = self.snapshot_number[content]
    if snapshot == 0:
        snapshot = self.snapshot_count + 1
        self.snapshot_count = snapshot
        self.snapshot_number[content] = snapshot
        self._store(snapshot, addrs, stakes, set_hash, mask)
    return snapshot


@internal
def _store(snapshot: uint256, addrs: DynArray[address, MAX_VALIDATORS], stakes: DynArray[uint256, MAX_VALIDATORS], set_hash: bytes32, mask: uint256):
    """
    @dev Stores a new validator snapshot: weights, their total, the key set and the
         stake of the validators whose keys it holds.
    """
    total: uint256 = 0
    keyed: uint256 = 0
    for i: uint256 in range(len(addrs), bound=MAX_VALIDATORS):
        weight: uint256 = min(stakes[i], WEIGHT_CAP)  # a larger stake still opens the round
        record: uint256 = weight | (i << INDEX_SHIFT)
        if mask & (1 << i) != 0:
            keyed += weight
            key_hash: uint256 = convert(staticcall self.keys.member_key_hash(set_hash, addrs[i]), uint256)
            record |= (key_hash >> KEY_SHIFT) << KEY_SHIFT
        self.snapshot_member[snapshot][addrs[i]] = record
        total += weight
    self.snapshot_validators[snapshot] = addrs
    self.snapshot_weights[snapshot] = total | (keyed << 128)
    self.snapshot_key_set[snapshot] = set_hash
    aggregate: Bytes[128] = staticcall self.keys.aggregate_of(set_hash)
    xy: Bytes[96] = concat(slice(aggregate, 16, 48), slice(aggregate, 80, 48))
    self.snapshot_aggregate[snapshot] = [extract32(xy, 0), extract32(xy, 32), extract32(xy, 64)]


@internal
def _record_reveal(round: uint256, validator: address):
    """
    @dev Marks `validator` revealed in `round` and adds its weight when the round's
         aggregate holds its key. The caller reveals each validator once, and only one
         that committed scores (so was permitted).
    """
    snapshot: uint256 = round_clock._snapshot(round)
    record: uint256 = self.snapshot_member[snapshot][validator]
    word: uint256 = self.revealed_word[round]
    if word == 0:
        word = (self.snapshot_weights[snapshot] & MASK128) << 160
    self.revealed_members[round] |= 1 << ((record >> INDEX_SHIFT) & 255)
    if record >> KEY_SHIFT != 0:
        word += (record & MASK96) << 64
    self.revealed_word[round] = word


@view
@external
def validators_of(round: uint256) -> DynArray[address, MAX_VALIDATORS]:
    """
    @notice The permitted validators of `round`, snapshotted when it opened.
    @param round The round.
    @return The validators, highest stake first.
    """
    return self.snapshot_validators[round_clock._snapshot(round)]


@view
@external
def validator_weight(round: uint256, validator: address) -> uint256:
    """
    @notice The stake `validator` held when `round` opened, if it held a permit (else 0).
    @param round The round.
    @param validator The account.
    @return Its weight in the round.
    """
    return self.snapshot_member[round_clock._snapshot(round)][validator] & MASK96


@view
@external
def signing_facts(round: uint256, accounts: DynArray[address, MAX_VALIDATORS]) -> (DynArray[uint256, MAX_VALIDATORS], bytes32[3], uint256, uint256, uint256):
    """
    @notice What a result post checks, in one call: the member records of `accounts`
            (weight in the low 96 bits, index in the snapshot in the next 8, the top 152
            bits of their key's keccak256 when the round's aggregate holds it), the
            round's aggregate BLS key (x and y without EIP-2537's zero padding: 96
            bytes, all zero for the point at infinity), and the certificate's measure. When the keyed validators that revealed hold
            at least 2/3 of the round's stake: their stake R twice (what may sign and
            what the signers need more than 2/3 of) and the revealed members (bit i for
            member i), so only revealed non-signers count as missing. Otherwise the
            keyed validators' stake, the total stake and every member.
    @param round The round.
    @param accounts Validators (0 for an account without a permit).
    @return Records, aggregate key, signable weight, base weight, counted members.
    """
    snapshot: uint256 = round_clock._snapshot(round)
    records: DynArray[uint256, MAX_VALIDATORS] = []
    for a: address in accounts:
        records.append(self.snapshot_member[snapshot][a])
    aggregate: bytes32[3] = self.snapshot_aggregate[snapshot]
    word: uint256 = self.revealed_word[round]
    revealed: uint256 = (word >> 64) & MASK96
    if revealed > 0 and revealed * 3 >= (word >> 160) * 2:
        return records, aggregate, revealed, revealed, self.revealed_members[round]
    weights: uint256 = self.snapshot_weights[snapshot]
    return records, aggregate, weights >> 128, weights & MASK128, max_value(uint256)


@view
@external
def total_weight(round: uint256) -> uint256:
    """
    @notice The stake of all permitted validators of `round`.
    @param round The round.
    @return The total weight.
    """
    return self.snapshot_weights[round_clock._snapshot(round)] & MASK128


@view
@external
def validator_set_hash(round: uint256) -> bytes32:
    """
    @notice The key of the round's cached aggregate BLS key (`BlsKeys.aggregate_of`).
    @param round The round.
    @return The set hash.
    """
    return self.snapshot_key_set[round_clock._snapshot(round)]


@view
@external
def weights_of(round: uint256, accounts: DynArray[address, MAX_VALIDATORS]) -> DynArray[uint256, MAX_VALIDATORS]:
    """
    @notice The snapshotted weights of `accounts` in `round`, in the same order.
    @param round The round.
    @param accounts Validators (0 for an account without a permit).
    @return One weight per account.
    """
    snapshot: uint256 = round_clock._snapshot(round)
    out: DynArray[uint256, MAX_VALIDATORS] = []
    for a: address in accounts:
        out.append(self.snapshot_member[snapshot][a] & MASK96)
    return out
