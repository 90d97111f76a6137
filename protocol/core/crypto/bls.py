"""BLS12-381 validator keys: the IETF "proof of possession" scheme, and EIP-2537 encodings.

Keys are G1 points (48-byte compressed), signatures G2 points (96-byte compressed), as in
py_ecc's `G2ProofOfPossession` (docs/PROTOCOL.md §11.8). Proofs of possession stop rogue-key
attacks, so signatures over the same message may be checked against the plain sum of keys
(FastAggregateVerify). Contracts take points uncompressed in the EIP-2537 layout: each field
element is 64 bytes (16 zero bytes, then 48 big-endian), G2 coordinates as (c0, c1).

Malformed inputs raise `BlsError`; a well-formed signature that does not verify gives False.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NewType

from py_ecc.bls.g2_primitives import (
    BLSPubkey,
    BLSSignature,
    G1_to_pubkey,
    pubkey_to_G1,
    signature_to_G2,
)
from py_ecc.optimized_bls12_381 import (
    FQ,
    FQ2,
    G1,
    Z1,
    add,
    curve_order,
    field_modulus,
    is_inf,
    neg,
    normalize,
)
from py_ecc.typing import Optimized_Point3D

from protocol.core.crypto.bls_suite import PopSuite as _Pop
from protocol.core.crypto.keccak import keccak256
from protocol.core.errors import BlsError

BlsSecret = NewType("BlsSecret", int)  # a scalar in [1, curve order)

DST_SIG = b"BLS_SIG_BLS12381G2_XMD:SHA-256_SSWU_RO_POP_"
DST_POP = b"BLS_POP_BLS12381G2_XMD:SHA-256_SSWU_RO_POP_"
# the proof a key is registered with: it signs the key bound to its owner and deployment, under
# a tag of its own, so a registration seen in the mempool or on another chain cannot be replayed
DST_POP_BOUND = b"VERITRAIN_POP_BOUND_V1_BLS12381G2_XMD:SHA-256_SSWU_RO_"
PUBLIC_KEY_BYTES, SIGNATURE_BYTES = 48, 96
G1_EIP2537_BYTES, G2_EIP2537_BYTES = 128, 256
_FP_BYTES = 64  # EIP-2537 pads every 48-byte base field element to 64 bytes


def bls_keygen(seed: bytes) -> BlsSecret:
    """The secret derived from `seed` (at least 32 bytes of entropy) by the IETF KeyGen."""
    if len(seed) < 32:
        raise BlsError(f"a BLS seed needs at least 32 bytes, got {len(seed)}")
    return BlsSecret(_Pop.KeyGen(seed))


def bls_public_key(sk: int) -> bytes:
    """The 48-byte compressed G1 public key of `sk`."""
    return bytes(_Pop.SkToPk(_check_secret(sk)))


def bls_sign(sk: int, message: bytes) -> bytes:
    """The 96-byte compressed G2 signature of `message` under DST_SIG."""
    return bytes(_Pop.Sign(_check_secret(sk), message))


def bls_aggregate(sigs: Sequence[bytes]) -> bytes:
    """The sum of `sigs` (at least one), 96 bytes compressed."""
    if not sigs:
        raise BlsError("cannot aggregate zero signatures")
    for sig in sigs:
        _decode_signature(sig)
    return bytes(_Pop.Aggregate([BLSSignature(bytes(s)) for s in sigs]))


def bls_aggregate_public_keys(pks: Sequence[bytes]) -> bytes:
    """The sum of `pks` (at least one), 48 bytes compressed: the key a same-message
    aggregate signature verifies under, and what BlsKeys.cache_aggregate computes on chain."""
    if not pks:
        raise BlsError("cannot aggregate zero public keys")
    total = Z1
    for pk in pks:
        total = add(total, _validated_public_key(pk))
    return bytes(G1_to_pubkey(total))


def bls_verify(pk: bytes, message: bytes, sig: bytes) -> bool:
    """Whether `sig` signs `message` under `pk`."""
    _decode_public_key(pk)
    _decode_signature(sig)
    return bool(_Pop.Verify(BLSPubkey(bytes(pk)), message, BLSSignature(bytes(sig))))


def bls_aggregate_verify_same_message(pks: Sequence[bytes], message: bytes, sig: bytes) -> bool:
    """FastAggregateVerify: whether `sig` is the aggregate of every `pks` signer's signature of
    `message`. Sound only for keys whose proofs of possession were checked."""
    for pk in pks:
        _decode_public_key(pk)
    _decode_signature(sig)
    return bool(_Pop.FastAggregateVerify([BLSPubkey(bytes(pk)) for pk in pks], message, BLSSignature(bytes(sig))))


def bound_pop_message(pk: bytes, account: bytes, chain_id: int, contract: bytes) -> bytes:
    """keccak256(key48 ‖ account20 ‖ chain id as a 32-byte word ‖ BlsKeys address20): what a
    registration's proof signs (BlsKeys.register recomputes it from msg.sender, chain.id, self)."""
    if len(pk) != PUBLIC_KEY_BYTES or len(account) != 20 or len(contract) != 20 or not 0 <= chain_id < 1 << 256:
        raise BlsError("a bound proof needs a 48-byte key, 20-byte addresses and a uint256 chain id")
    return keccak256(bytes(pk) + bytes(account) + chain_id.to_bytes(32, "big") + bytes(contract))


def bls_bound_pop_prove(sk: int, account: bytes, chain_id: int, contract: bytes) -> bytes:
    """The proof of possession a key registers with: its signature, under DST_POP_BOUND, of the
    key bound to the registering account, the chain and the BlsKeys contract."""
    message = bound_pop_message(bls_public_key(sk), account, chain_id, contract)
    return bytes(_Pop._CoreSign(_check_secret(sk), message, DST_POP_BOUND))


def bls_bound_pop_verify(pk: bytes, pop: bytes, account: bytes, chain_id: int, contract: bytes) -> bool:
    """Whether `pop` proves possession of `pk`'s secret for this account and deployment."""
    _decode_public_key(pk)
    _decode_signature(pop)
    message = bound_pop_message(pk, account, chain_id, contract)
    return bool(_Pop._CoreVerify(BLSPubkey(bytes(pk)), message, BLSSignature(bytes(pop)), DST_POP_BOUND))


def g1_to_eip2537(pk48: bytes) -> bytes:
    """A valid compressed public key as the 128-byte EIP-2537 G1 point (x, y)."""
    x, y = normalize(_validated_public_key(pk48))
    return _fp(x) + _fp(y)


def g2_to_eip2537(sig96: bytes) -> bytes:
    """A compressed signature as the 256-byte EIP-2537 G2 point (x.c0, x.c1, y.c0, y.c1);
    the point at infinity is 256 zero bytes."""
    point = _decode_signature(sig96)
    if is_inf(point):
        return bytes(G2_EIP2537_BYTES)
    x, y = normalize(point)
    return _fp2(x) + _fp2(y)


def g1_from_eip2537(point: bytes) -> bytes:
    """A 128-byte EIP-2537 G1 point (e.g. an aggregate read from chain) as 48 bytes compressed."""
    if len(point) != G1_EIP2537_BYTES:
        raise BlsError(f"an EIP-2537 G1 point is {G1_EIP2537_BYTES} bytes, got {len(point)}")
    x, y = _unfp(point[:_FP_BYTES]), _unfp(point[_FP_BYTES:])
    if x == 0 and y == 0:
        return bytes(G1_to_pubkey((FQ.one(), FQ.one(), FQ.zero())))
    return bytes(G1_to_pubkey((FQ(x), FQ(y), FQ.one())))


def _fp(element: FQ) -> bytes:
    return int(element).to_bytes(_FP_BYTES, "big")


def _fp2(element: FQ2) -> bytes:
    c0, c1 = element.coeffs
    return int(c0).to_bytes(_FP_BYTES, "big") + int(c1).to_bytes(_FP_BYTES, "big")


def _unfp(data: bytes) -> int:
    value = int.from_bytes(data, "big")
    if value >= field_modulus:
        raise BlsError("an EIP-2537 field element must be below the field modulus")
    return value


def _check_secret(sk: int) -> int:
    if not isinstance(sk, int) or not 0 < sk < curve_order:
        raise BlsError("a BLS secret is an integer in [1, curve order)")
    return sk


def _decode_public_key(pk: bytes) -> Optimized_Point3D[FQ]:
    """The point of a well-formed key (48 bytes, valid flags, on the curve); the costly subgroup
    check is left to py_ecc's verifiers, where a failure is an ordinary False."""
    if len(pk) != PUBLIC_KEY_BYTES:
        raise BlsError(f"a BLS public key is {PUBLIC_KEY_BYTES} bytes, got {len(pk)}")
    try:
        return pubkey_to_G1(BLSPubkey(bytes(pk)))
    except (ValueError, AssertionError) as exc:
        raise BlsError(f"not a BLS public key: {exc}") from exc


def _validated_public_key(pk: bytes) -> Optimized_Point3D[FQ]:
    """The point of a key fit to register or aggregate: also in the subgroup and not infinity."""
    point = _decode_public_key(pk)
    if not _Pop.KeyValidate(BLSPubkey(bytes(pk))):
        raise BlsError("BLS public key is the point at infinity or outside the prime-order subgroup")
    return point


def _decode_signature(sig: bytes) -> Optimized_Point3D[FQ2]:
    """The point of a well-formed signature (96 bytes, valid flags, on the curve)."""
    if len(sig) != SIGNATURE_BYTES:
        raise BlsError(f"a BLS signature is {SIGNATURE_BYTES} bytes, got {len(sig)}")
    try:
        return signature_to_G2(BLSSignature(bytes(sig)))
    except (ValueError, AssertionError) as exc:
        raise BlsError(f"not a BLS signature: {exc}") from exc


def _neg_g1_generator() -> bytes:
    x, y = normalize(neg(G1))
    return _fp(x) + _fp(y)


NEG_G1_GENERATOR_EIP2537 = _neg_g1_generator()  # the pairing check's e(-G1, sig) term
