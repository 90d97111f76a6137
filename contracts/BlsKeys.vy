# pragma version ~=0.4.3
# pragma evm-version prague
# SPDX-License-Identifier: AGPL-3.0-only
"""
@title veritrain BLS keys: one BLS12-381 key per validator, and the permitted set they sign for
@custom:contract-name bls_keys
@license GNU Affero General Public License v3.0 only (builds on snekmate)
@notice A validator registers one BLS key (a G1 point in the EIP-2537 layout) with a
        proof of possession, once; the key never changes. The proof stops rogue keys,
        so a same-message aggregate signature verifies against the plain sum of its
        signers' keys. The registry also keeps the permitted validators' log
        (`permit_log`): staking reports each change as it happens, the registry adds
        the keys, and a round that opens freezes the current version, so the sum of
        the permitted keys is kept as they come and go, never recomputed.
        Revert strings are prefixed "bls: ".
"""

from snekmate.auth import ownable

initializes: ownable

from . import bls
from . import constants
from . import permit_log
from .interfaces import IBlsKeys
from .interfaces import IStaking

implements: IBlsKeys

initializes: permit_log

exports: permit_log.version

MAX_VALIDATORS: constant(uint256) = constants.MAX_VALIDATORS
# the proof of possession's own tag (protocol/core/crypto/bls.py DST_POP_BOUND)
DST_POP_BOUND: constant(Bytes[54]) = b"VERITRAIN_POP_BOUND_V1_BLS12381G2_XMD:SHA-256_SSWU_RO_"
ROLE_VALIDATOR: constant(uint8) = 2

staking: public(immutable(IStaking))
# the only caller of `freeze` (named once by `wire`)
rounds: public(address)

# the registered key of each account (empty: none) and keccak256 of it (zero: none)
key_of: public(HashMap[address, Bytes[128]])
key_hash: public(HashMap[address, bytes32])
# who registered each key: a copied key (its proof is public) would share a signer's work
key_owner: public(HashMap[bytes32, address])


event BlsKeyRegistered:
    account: indexed(address)
    pubkey: Bytes[128]

event PermitChanged:
    account: indexed(address)
    version: uint256
    record: uint256

event Wired:
    rounds: address


@deploy
def __init__(staking_: IStaking):
    """
    @notice Binds the registry to the staking contract whose validators may register
            and which reports the permitted set.
    @param staking_ The staking registry (asked for `role`; the only caller of
           `note_validator`).
    """
    assert staking_.address != empty(address), "bls: zero address"
    staking = staking_
    ownable.__init__()
    permit_log.__init__()


@external
def wire(rounds_: address):
    """
    @notice Names the rounds contract once, then renounces ownership.
    @param rounds_ The only caller of `freeze`.
    """
    ownable._check_owner()
    assert rounds_ != empty(address), "bls: zero address"
    self.rounds = rounds_
    ownable._transfer_ownership(empty(address))
    log Wired(rounds=rounds_)


@external
def register(pubkey: Bytes[128], pop: Bytes[256]):
    """
    @notice Registers the caller's BLS key, once; a registered key never changes.
    @dev The caller must hold the validator role in staking; no other account may
         hold the same key.
    @param pubkey The key as an EIP-2537 G1 point (x, y), not the point at infinity.
    @param pop The proof of possession: the key's signature (EIP-2537 G2 point), under
           DST_POP_BOUND, of keccak256(its 48-byte compressed form, the caller, chain.id
           as a word, this contract): bound to its owner and deployment, so a registration
           copied from the mempool or another chain is refused.
    """
    assert staticcall staking.role(msg.sender) == ROLE_VALIDATOR, "bls: not a validator"
    assert self.key_hash[msg.sender] == empty(bytes32), "bls: key already registered"
    assert len(pubkey) == 128, "bls: a key is 128 bytes"
    assert not bls._is_infinity(pubkey), "bls: key is the point at infinity"
    digest: bytes32 = keccak256(pubkey)
    assert self.key_owner[digest] == empty(address), "bls: key taken"
    bound: bytes32 = keccak256(concat(bls._compress_g1(pubkey), convert(msg.sender, bytes20),
                                      convert(chain.id, bytes32), convert(self, bytes20)))
    assert bls._verify(pubkey, concat(bound, b""), pop, DST_POP_BOUND), "bls: invalid proof of possession"
    self.key_of[msg.sender] = pubkey
    self.key_hash[msg.sender] = digest
    self.key_owner[digest] = msg.sender
    log BlsKeyRegistered(account=msg.sender, pubkey=pubkey)
    record: uint256 = permit_log._latest(convert(msg.sender, uint256))
    if record != 0:  # a permitted validator's key joins the aggregate of the next round
        self._note(msg.sender, (record >> constants.MEMBER_INDEX_SHIFT) & 65535, record & permit_log.MASK96)


@external
def note_validator(account: address, slot: uint256, stake: uint256):
    """
    @notice Records a change to the permitted set as of the current version: `account`
            holds permit slot `slot` with `stake`, or (stake 0) no permit any more.
    @dev Only the staking contract may call this, on every such change.
    @param account The validator.
    @param slot Its position among the permitted validators (from 0).
    @param stake Its stake (wei; its weight is this, capped), 0 when it leaves.
    """
    assert msg.sender == staking.address, "bls: only staking"
    assert slot < MAX_VALIDATORS, "bls: slot out of range"
    self._note(account, slot, stake)


@external
def freeze() -> uint256:
    """
    @notice Freezes the current version of the permitted set for a round that opens;
            later changes go to the next version.
    @dev Only the rounds contract may call this.
    @return The frozen version (the round's snapshot).
    """
    assert msg.sender == self.rounds, "bls: only rounds"
    return permit_log._freeze()


@internal
def _note(account: address, slot: uint256, stake: uint256):
    """
    @dev Logs `account`'s permit with its key, when it has one.
    """
    permit_log._note(account, slot, stake, self.key_hash[account], self.key_of[account])
    log PermitChanged(account=account, version=permit_log.version,
                      record=permit_log._latest(convert(account, uint256)))


@view
@external
def member_at(version: uint256, account: address) -> uint256:
    """
    @notice `account`'s member record in a version of the permitted set: its weight
            (stake, capped) in the low 96 bits, its position in the next 16, the top
            104 bits of its key's keccak256 (0 while it had no key) above; 0 when it
            held no permit.
    @param version A frozen version (a round's snapshot).
    @param account The account.
    @return The record.
    """
    return permit_log._record_at(version, account)


@view
@external
def records_at(version: uint256, accounts: DynArray[address, MAX_VALIDATORS]) -> DynArray[uint256, MAX_VALIDATORS]:
    """
    @notice The member records (`member_at`) of `accounts` in a version, in order.
    @param version A frozen version.
    @param accounts The accounts.
    @return One record per account.
    """
    out: DynArray[uint256, MAX_VALIDATORS] = []
    for a: address in accounts:
        out.append(permit_log._record_at(version, a))
    return out


@view
@external
def members_at(version: uint256) -> DynArray[address, MAX_VALIDATORS]:
    """
    @notice The permitted validators in a version, by position.
    @param version A frozen version.
    @return The validators.
    """
    return permit_log._members_at(version)


@view
@external
def member_in_slot(version: uint256, slot: uint256) -> address:
    """
    @notice The validator at position `slot` in a version of the permitted set.
    @param version A frozen version.
    @param slot The position (from 0).
    @return The validator; empty when none held that slot then.
    """
    return permit_log._slot_at(version, slot)


@view
@external
def totals_at(version: uint256) -> (uint256, uint256, uint256):
    """
    @notice The member count, the total weight and the keyed weight (members whose key
            the aggregate holds) in a version.
    @param version A frozen version.
    @return Count, total weight, keyed weight.
    """
    return permit_log._totals_at(version)


@view
@external
def aggregate_at(version: uint256) -> bytes32[3]:
    """
    @notice The sum of the keyed members' keys in a version: x and y without
            EIP-2537's zero padding (96 bytes; all zero for the point at infinity).
    @param version A frozen version.
    @return The aggregate key in three words.
    """
    return permit_log._packed_aggregate_at(version)


@view
@external
def verify(pk: Bytes[128], message: bytes32, sig: Bytes[256]) -> bool:
    """
    @notice Whether `sig` signs the 32 bytes `message` under `pk` (signature DST).
    @param pk An EIP-2537 G1 point: a key, or an aggregate from `aggregate_at`.
    @param message The signed 32 bytes (a result root).
    @param sig An EIP-2537 G2 point.
    @return True when the pairing check holds; False for a wrong or malformed signature.
    """
    if bls._is_infinity(pk):
        return False
    return bls._verify(pk, slice(message, 0, 32), sig, bls.DST_SIG)
