# pragma version ~=0.4.3
# pragma evm-version prague
# SPDX-License-Identifier: AGPL-3.0-only
"""
@title veritrain BLS keys: one BLS12-381 key per validator, and cached key-set aggregates
@custom:contract-name bls_keys
@license GNU Affero General Public License v3.0 only
@notice A validator registers one BLS key (a G1 point in the EIP-2537 layout) with a
        proof of possession, once; the key never changes. The proof stops rogue keys,
        so a same-message aggregate signature verifies against the plain sum of its
        signers' keys, which `cache_aggregate` computes once per validator set.
        Revert strings are prefixed "bls: ".
"""

from . import bls
from . import constants
from .interfaces import IBlsKeys
from .interfaces import IStaking

implements: IBlsKeys

MAX_VALIDATORS: constant(uint256) = constants.MAX_VALIDATORS
# the proof of possession's own tag (protocol/core/crypto/bls.py DST_POP_BOUND)
DST_POP_BOUND: constant(Bytes[54]) = b"VERITRAIN_POP_BOUND_V1_BLS12381G2_XMD:SHA-256_SSWU_RO_"
ROLE_VALIDATOR: constant(uint8) = 2

staking: public(immutable(IStaking))

# the registered key of each account (empty: none) and keccak256 of it (zero: none)
key_of: public(HashMap[address, Bytes[128]])
key_hash: public(HashMap[address, bytes32])
# who registered each key: a copied key (its proof is public) would share a signer's work
key_owner: public(HashMap[bytes32, address])
# counts registrations; each key records the count at its registration, each cached set
# the count when it was summed, so which keys an aggregate holds is known exactly
key_clock: public(uint256)
key_since: public(HashMap[address, uint256])
set_clock: public(HashMap[bytes32, uint256])
# bit i set: addrs[i] of the set has its key in the aggregate
set_mask: public(HashMap[bytes32, uint256])
# G1 sum of a set's keys by keccak256(abi_encode(addrs, key_clock)); empty: not cached
aggregate_of: public(HashMap[bytes32, Bytes[128]])


event BlsKeyRegistered:
    account: indexed(address)
    pubkey: Bytes[128]

event AggregateCached:
    set_hash: indexed(bytes32)
    aggregate: Bytes[128]
    keyed: uint256


@deploy
def __init__(staking_: IStaking):
    """
    @notice Binds the registry to the staking contract whose validators may register.
    @param staking_ The staking registry (asked for `role`).
    """
    assert staking_.address != empty(address), "bls: zero address"
    staking = staking_


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
    clock: uint256 = self.key_clock + 1
    self.key_clock = clock
    self.key_since[msg.sender] = clock
    log BlsKeyRegistered(account=msg.sender, pubkey=pubkey)


@external
def cache_aggregate(addrs: DynArray[address, MAX_VALIDATORS]) -> (bytes32, uint256):
    """
    @notice Caches the G1 sum of the keys of `addrs` (accounts without a key are
            skipped; no key at all gives the point at infinity), unless already cached.
    @dev The set hash covers the registration clock, so a key registered since the
         set was last summed gives a new set hash and a new sum: a validator that
         registers its key late joins the next round's aggregate. `member_key_hash`
         says which keys a cached aggregate holds. `addrs` should hold no duplicates.
    @param addrs The validator set, in the order the caller hashes it.
    @return set_hash keccak256(abi_encode(addrs, key_clock)), the key of `aggregate_of`,
            and the mask of the positions in `addrs` whose keys the aggregate holds.
    """
    clock: uint256 = self.key_clock
    set_hash: bytes32 = keccak256(abi_encode(addrs, clock))
    if len(self.aggregate_of[set_hash]) != 0:
        return set_hash, self.set_mask[set_hash]
    self.set_clock[set_hash] = clock
    total: Bytes[128] = b""
    keyed: uint256 = 0
    mask: uint256 = 0
    for i: uint256 in range(len(addrs), bound=MAX_VALIDATORS):
        account: address = addrs[i]
        if self.key_hash[account] == empty(bytes32):
            continue
        keyed += 1
        mask |= 1 << i
        if len(total) == 0:
            total = self.key_of[account]  # the first key needs no addition
        else:
            total = bls._g1_add(total, self.key_of[account])
    if keyed == 0:
        total = concat(empty(bytes32), empty(bytes32), empty(bytes32), empty(bytes32))
    self.aggregate_of[set_hash] = total
    self.set_mask[set_hash] = mask
    log AggregateCached(set_hash=set_hash, aggregate=total, keyed=keyed)
    return set_hash, mask


@view
@external
def member_key_hash(set_hash: bytes32, account: address) -> bytes32:
    """
    @notice keccak256 of `account`'s key if the cached aggregate `set_hash` holds it
            (the key was registered before the set was summed), else zero.
    @param set_hash A cached set (as `cache_aggregate` returned it).
    @param account A member of the set.
    @return The key's hash, or zero.
    """
    since: uint256 = self.key_since[account]
    if since == 0 or since > self.set_clock[set_hash]:
        return empty(bytes32)
    return self.key_hash[account]


@view
@external
def verify(pk: Bytes[128], message: bytes32, sig: Bytes[256]) -> bool:
    """
    @notice Whether `sig` signs the 32 bytes `message` under `pk` (signature DST).
    @param pk An EIP-2537 G1 point: a key, or an aggregate from `aggregate_of`.
    @param message The signed 32 bytes (a result root).
    @param sig An EIP-2537 G2 point.
    @return True when the pairing check holds; False for a wrong or malformed signature.
    """
    if bls._is_infinity(pk):
        return False
    return bls._verify(pk, slice(message, 0, 32), sig, bls.DST_SIG)
