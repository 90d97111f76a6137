"""BlsKeys and the bls module on the EIP-2537 precompiles (boa runs py-evm's Prague VM).

Every on-chain BLS check is a pairing plus a hash to G2, seconds in py-evm, so the tests
are few and each one checks several things.
"""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path

import boa
from conftest import MINER, VALIDATOR, deploy_stack, join, last_logs, partial
from eth_utils import keccak

from protocol.core.crypto.bls import (
    DST_SIG,
    bls_aggregate,
    bls_aggregate_public_keys,
    bls_bound_pop_prove,
    bls_keygen,
    bls_public_key,
    bls_sign,
    g1_to_eip2537,
    g2_to_eip2537,
)

HARNESS = Path(__file__).parent / "mocks" / "BlsHarness.vy"
ROOT = b"\x42" * 32  # a result root
INFINITY_G1 = bytes(128)
ZERO = "0x" + "00" * 20
# gas the bls module may spend (boa counts execution, not the 21000 + calldata of a transaction)
MAX_VERIFY_GAS = 200_000
MAX_REGISTER_GAS = 380_000  # the check above plus seven fresh storage slots


@functools.cache
def validator_key(i: int) -> tuple[int, bytes, bytes]:
    """(secret, compressed key, EIP-2537 key) of validator i."""
    sk = bls_keygen(keccak(b"bls-test-%d" % i))
    pk = bls_public_key(sk)
    return sk, pk, g1_to_eip2537(pk)


def pop_for(i: int, account: str, keys, chain_id: int | None = None) -> bytes:  # type: ignore[no-untyped-def]
    """Validator i's proof of possession, bound to `account` and the `keys` deployment."""
    chain = boa.env.evm.patch.chain_id if chain_id is None else chain_id
    pop = bls_bound_pop_prove(validator_key(i)[0], bytes.fromhex(str(account)[2:]), chain,
                              bytes.fromhex(str(keys.address)[2:]))
    return g2_to_eip2537(pop)


def registry():
    stack = deploy_stack()
    return stack, partial("BlsKeys").deploy(stack.staking.address)


def registered(stack, keys, i: int) -> str:
    account = join(stack, VALIDATOR, 0)
    keys.register(validator_key(i)[2], pop_for(i, account, keys), sender=account)
    return account


def test_register_stores_the_key_once():
    stack, keys = registry()
    account = join(stack, VALIDATOR, 0)
    key, pop = validator_key(0)[2], pop_for(0, account, keys)
    keys.register(key, pop, sender=account)
    gas = keys._computation.get_gas_used()
    (event,) = last_logs(keys, "BlsKeyRegistered")
    print(f"register: {gas} gas")
    assert gas < MAX_REGISTER_GAS
    assert keys.key_of(account) == key and keys.key_hash(account) == keccak(key)
    assert keys.key_owner(keccak(key)) == account
    assert (event.account, event.pubkey) == (account, key)
    assert keys.key_hash(boa.env.generate_address()) == b"\x00" * 32
    with boa.reverts("bls: key already registered"):
        keys.register(validator_key(1)[2], pop_for(1, account, keys), sender=account)
    other = join(stack, VALIDATOR, 0)
    with boa.reverts("bls: key taken"):
        keys.register(key, pop_for(0, other, keys), sender=other)


def test_a_registration_replayed_from_another_account_or_deployment_is_refused():
    """The squatter: it copies a victim's registration from the mempool (or from another
    deployment) and sends it first, so the victim's key would be taken and its node could not
    start. The proof signs the key with its owner, chain and contract: a copy proves nothing."""
    stack, keys = registry()
    victim, squatter = join(stack, VALIDATOR, 0), join(stack, VALIDATOR, 0)
    key, victims_pop = validator_key(0)[2], pop_for(0, victim, keys)
    with boa.reverts("bls: invalid proof of possession"):
        keys.register(key, victims_pop, sender=squatter)  # the mempool copy
    elsewhere = partial("BlsKeys").deploy(stack.staking.address)
    with boa.reverts("bls: invalid proof of possession"):
        keys.register(key, pop_for(0, victim, elsewhere), sender=victim)  # another deployment's
    with boa.reverts("bls: invalid proof of possession"):
        keys.register(key, pop_for(0, victim, keys, chain_id=boa.env.evm.patch.chain_id + 1), sender=victim)
    unbound = g2_to_eip2537(bls_sign(validator_key(0)[0], validator_key(0)[1]))
    with boa.reverts("bls: invalid proof of possession"):
        keys.register(key, unbound, sender=victim)  # the key alone, as the IETF proof signs it
    # the victim, unharmed: its own proof registers its key
    keys.register(key, victims_pop, sender=victim)
    assert keys.key_of(victim) == key and keys.key_hash(squatter) == b"\x00" * 32


def test_register_refuses_bad_proofs_infinity_and_non_validators():
    stack, keys = registry()
    account = join(stack, VALIDATOR, 0)
    key, pop = validator_key(0)[2], pop_for(0, account, keys)
    with boa.reverts("bls: invalid proof of possession"):
        keys.register(key, pop_for(1, account, keys), sender=account)  # another key's proof
    with boa.reverts("bls: invalid proof of possession"):
        keys.register(key, b"\x01" * 256, sender=account)  # not a G2 point
    with boa.reverts("bls: invalid proof of possession"):
        keys.register(key, g2_to_eip2537(bls_sign(validator_key(0)[0], validator_key(0)[1])), sender=account)  # DST_SIG
    with boa.reverts("bls: key is the point at infinity"):
        keys.register(INFINITY_G1, bytes(256), sender=account)
    with boa.reverts("bls: not a validator"):
        keys.register(key, pop, sender=join(stack, MINER, 0))
    with boa.reverts("bls: not a validator"):
        keys.register(key, pop, sender=boa.env.generate_address())
    assert keys.key_hash(account) == b"\x00" * 32


def test_verify_accepts_py_ecc_signatures_only():
    _, keys = registry()
    sk, _, key = validator_key(0)
    sig = g2_to_eip2537(bls_sign(sk, ROOT))
    assert keys.verify(key, ROOT, sig)
    gas = keys._computation.get_gas_used()
    print(f"verify: {gas} gas")
    assert gas < MAX_VERIFY_GAS
    assert not keys.verify(key, b"\x43" * 32, sig)
    assert not keys.verify(validator_key(1)[2], ROOT, sig)
    assert not keys.verify(key, ROOT, b"\x01" * 256)  # garbage: False, not a revert
    assert not keys.verify(INFINITY_G1, ROOT, bytes(256))  # infinity verifies anything: refused


def logged_registry(permits: int):
    """A staking registry of `permits` permits wired to a fresh key registry whose versions
    this test freezes itself (the deployer stands in for the rounds contract)."""
    stack = deploy_stack()
    p = stack.params
    staking = partial("Staking").deploy(stack.token.address, p.min_miner_stake, p.min_validator_stake, permits,
                                        p.unbonding_delay, 2 * p.min_validator_stake)
    keys = partial("BlsKeys").deploy(staking.address)
    staking.wire(stack.deployer, stack.deployer, keys.address)
    keys.wire(stack.deployer)
    return dataclasses.replace(stack, staking=staking, keys=keys), keys


def unpacked(words) -> bytes:  # type: ignore[no-untyped-def]
    """`aggregate_at`'s three words as an EIP-2537 G1 point."""
    xy = b"".join(words)
    return bytes(16) + xy[:48] + bytes(16) + xy[48:]


def record(weight: int, position: int, key: bytes | None) -> int:
    """A member record as `member_at` packs it (contracts/constants.vy)."""
    key_bits = int.from_bytes(keccak(key), "big") >> 152 if key else 0
    return weight | position << 96 | key_bits << 112


def test_the_permit_log_keeps_every_version_and_the_sum_of_its_keys():
    stack, keys = logged_registry(permits=3)
    unit = stack.params.min_validator_stake
    a = registered(stack, keys, 0)
    b = join(stack, VALIDATOR, 0)
    c = registered(stack, keys, 1)
    for account, stake in ((a, unit), (b, 2 * unit), (c, unit)):
        stack.token.transfer(account, stake, sender=stack.deployer)
        stack.staking.stake(stake, sender=account)
        print(f"stake that joins the permitted set: {stack.staking._computation.get_gas_used()} gas")
    with boa.reverts("bls: only rounds"):
        keys.freeze(sender=a)
    with boa.reverts("bls: only staking"):
        keys.note_validator(a, 0, unit, sender=a)
    v1 = keys.freeze()
    print(f"freeze: {keys._computation.get_gas_used()} gas, whatever the set's size")
    pk = [validator_key(i)[1] for i in range(3)]
    assert keys.members_at(v1) == [a, b, c]
    assert keys.totals_at(v1) == (3, 4 * unit, 2 * unit)
    assert keys.records_at(v1, [a, b, c, ZERO]) == [record(unit, 0, validator_key(0)[2]),
                                                    record(2 * unit, 1, None), record(unit, 2, validator_key(1)[2]), 0]
    assert unpacked(keys.aggregate_at(v1)) == g1_to_eip2537(bls_aggregate_public_keys(pk[:2]))
    # b's key arrives, a leaves (c takes its slot), d joins; version 1 reads as it was
    keys.register(validator_key(2)[2], pop_for(2, b, keys), sender=b)
    stack.staking.request_unbond(unit, sender=a)
    d = join(stack, VALIDATOR, 3 * unit)
    v2 = keys.freeze()
    assert keys.members_at(v1) == [a, b, c] and keys.totals_at(v1) == (3, 4 * unit, 2 * unit)
    assert keys.members_at(v2) == [c, b, d]
    assert keys.totals_at(v2) == (3, 6 * unit, 3 * unit)
    assert keys.member_at(v2, a) == 0 and keys.member_at(v2, c) == record(unit, 0, validator_key(1)[2])
    assert unpacked(keys.aggregate_at(v2)) == g1_to_eip2537(bls_aggregate_public_keys(pk[1:]))
    # a full set: a larger stake evicts the smallest (c), whose key leaves the sum
    e = join(stack, VALIDATOR, 4 * unit)
    gas = stack.staking._computation.get_gas_used()
    print(f"stake that evicts a keyed member: {gas} gas")
    v3 = keys.freeze()
    assert keys.members_at(v3) == [d, b, e] and keys.totals_at(v3) == (3, 9 * unit, 2 * unit)
    assert unpacked(keys.aggregate_at(v3)) == validator_key(2)[2]
    assert keys.members_at(v2) == [c, b, d]
    sig = bls_aggregate([bls_sign(validator_key(i)[0], ROOT) for i in (1, 2)])
    assert keys.verify(unpacked(keys.aggregate_at(v2)), ROOT, g2_to_eip2537(sig))
    # nobody keyed left: the point at infinity
    stack.staking.request_unbond(2 * unit, sender=b)
    assert unpacked(keys.aggregate_at(keys.freeze())) == INFINITY_G1
    assert keys.members_at(0) == [] and keys.aggregate_at(0) == [bytes(32)] * 3


def test_module_points_and_hash_to_curve_match_py_ecc():
    from hashlib import sha256

    from py_ecc.bls.hash_to_curve import hash_to_G2
    from py_ecc.optimized_bls12_381 import normalize

    harness = boa.load_partial(str(HARNESS)).deploy()
    x, y = normalize(hash_to_G2(b"veritrain", DST_SIG, sha256))
    assert harness.hash_to_g2(b"veritrain", DST_SIG) == b"".join(
        int(c).to_bytes(64, "big") for c in (*x.coeffs, *y.coeffs))
    flags = set()
    for i in range(4):
        _, pk, key = validator_key(i)
        assert harness.compress_g1(key) == pk
        flags.add(pk[0] & 0x20)
        assert harness.g1_add(key, harness.g1_neg(key)) == INFINITY_G1
    assert flags == {0, 0x20}  # both signs of y were compressed
    assert harness.compress_g1(INFINITY_G1) == b"\xc0" + bytes(47)
    assert harness.g1_neg(INFINITY_G1) == INFINITY_G1


def test_starving_the_pairing_reverts_instead_of_returning_false():
    _, keys = registry()
    sk, _, key = validator_key(0)
    sig = g2_to_eip2537(bls_sign(sk, ROOT))
    with boa.reverts("bls: out of gas for the pairing"):
        keys.verify(key, ROOT, sig, gas=120_000)  # enough to hash to G2, not to pair


def test_registry_is_well_under_eip170():
    from contracts.build import EIP170_LIMIT

    runtime = len(partial("BlsKeys").compiler_data.bytecode_runtime)
    assert runtime + 32 < 0.6 * EIP170_LIMIT, f"BlsKeys: {runtime} bytes of runtime code"  # + the staking immutable
