"""BLS12-381 keys: sign/verify, aggregation, proofs of possession, EIP-2537 encodings, typed errors."""

from __future__ import annotations

import functools

import pytest
from py_ecc.bls import G2ProofOfPossession
from py_ecc.bls.g2_primitives import pubkey_to_G1, signature_to_G2
from py_ecc.optimized_bls12_381 import G1, field_modulus, normalize

from protocol.core.crypto.bls import (
    DST_POP,
    DST_POP_BOUND,
    DST_SIG,
    NEG_G1_GENERATOR_EIP2537,
    bls_aggregate,
    bls_aggregate_public_keys,
    bls_aggregate_verify_same_message,
    bls_bound_pop_prove,
    bls_bound_pop_verify,
    bls_keygen,
    bls_public_key,
    bls_sign,
    bls_verify,
    bound_pop_message,
    g1_from_eip2537,
    g1_to_eip2537,
    g2_to_eip2537,
)
from protocol.core.errors import BlsError

MESSAGE = b"\x5a" * 32  # a result root


@functools.cache
def keys(n: int = 3) -> tuple[list[int], list[bytes]]:
    sks = [bls_keygen(bytes([i + 1]) * 32) for i in range(n)]
    return sks, [bls_public_key(sk) for sk in sks]


def test_ciphersuite_is_py_ecc_proof_of_possession():
    assert (DST_SIG, DST_POP) == (G2ProofOfPossession.DST, G2ProofOfPossession.POP_TAG)


def test_signatures_proofs_and_verdicts_are_py_ecc_s_bit_for_bit():
    """bls_suite hashes to G2 its own (faster) way: every output must still be py_ecc's."""
    (sk, other), (pk, other_pk) = (s[:2] for s in keys())
    sig = bls_sign(sk, MESSAGE)
    assert sig == G2ProofOfPossession.Sign(sk, MESSAGE)
    forged = bls_sign(other, MESSAGE)
    for key, signature in ((pk, sig), (pk, forged), (other_pk, forged), (other_pk, sig)):
        assert bls_verify(key, MESSAGE, signature) == G2ProofOfPossession.Verify(key, MESSAGE, signature)
    assert [bls_verify(pk, MESSAGE, s) for s in (sig, forged)] == [True, False]


def test_sign_verify_round_trip_and_wrong_message_fails():
    (sk, other), (pk, other_pk) = (s[:2] for s in keys())
    sig = bls_sign(sk, MESSAGE)
    assert len(pk) == 48 and len(sig) == 96
    assert bls_verify(pk, MESSAGE, sig)
    assert not bls_verify(pk, b"\x00" * 32, sig)
    assert not bls_verify(other_pk, MESSAGE, sig)


def test_same_message_aggregate_verifies_against_every_signer():
    sks, pks = keys()
    agg = bls_aggregate([bls_sign(sk, MESSAGE) for sk in sks])
    assert bls_aggregate_verify_same_message(pks, MESSAGE, agg)
    assert not bls_aggregate_verify_same_message(pks[:2], MESSAGE, agg)
    # the aggregate key is what BlsKeys.cache_aggregate sums on chain
    assert bls_verify(bls_aggregate_public_keys(pks), MESSAGE, agg)


def test_proof_of_possession_binds_the_key_its_owner_and_deployment():
    (sk, other), (pk, other_pk) = (s[:2] for s in keys())
    owner, contract = b"\x11" * 20, b"\x22" * 20
    pop = bls_bound_pop_prove(sk, owner, 1, contract)
    assert bls_bound_pop_verify(pk, pop, owner, 1, contract)
    assert not bls_bound_pop_verify(other_pk, pop, owner, 1, contract)
    assert not bls_bound_pop_verify(pk, pop, b"\x33" * 20, 1, contract)  # replayed by another account
    assert not bls_bound_pop_verify(pk, pop, owner, 2, contract)  # on another chain
    assert not bls_bound_pop_verify(pk, pop, owner, 1, b"\x44" * 20)  # at another deployment
    # its own tag: never a DST_SIG signature of the same digest, nor the IETF proof of the key
    message = bound_pop_message(pk, owner, 1, contract)
    assert not bls_verify(pk, message, pop)
    assert not bls_bound_pop_verify(pk, G2ProofOfPossession.PopProve(sk), owner, 1, contract)
    assert DST_POP_BOUND not in (DST_SIG, DST_POP)


def test_eip2537_encodings_match_py_ecc_coordinates():
    (sk,), (pk,) = (s[:1] for s in keys())
    x, y = normalize(pubkey_to_G1(pk))
    encoded = g1_to_eip2537(pk)
    assert encoded == bytes(16) + int(x).to_bytes(48, "big") + bytes(16) + int(y).to_bytes(48, "big")
    assert g1_from_eip2537(encoded) == pk
    sig = bls_sign(sk, MESSAGE)
    sx, sy = normalize(signature_to_G2(sig))
    coords = [*sx.coeffs, *sy.coeffs]  # x.c0, x.c1, y.c0, y.c1
    assert g2_to_eip2537(sig) == b"".join(bytes(16) + int(c).to_bytes(48, "big") for c in coords)
    gx, gy = normalize(G1)
    assert NEG_G1_GENERATOR_EIP2537 == int(gx).to_bytes(64, "big") + (field_modulus - int(gy)).to_bytes(64, "big")


def test_infinity_encodings():
    infinity_sig = b"\xc0" + bytes(95)
    assert g2_to_eip2537(infinity_sig) == bytes(256)
    assert g1_from_eip2537(bytes(128)) == b"\xc0" + bytes(47)
    with pytest.raises(BlsError, match="infinity"):
        g1_to_eip2537(b"\xc0" + bytes(47))  # never a registrable key


@pytest.mark.parametrize("call", [
    lambda pk, sig: bls_keygen(b"short"),
    lambda pk, sig: bls_public_key(0),
    lambda pk, sig: bls_sign(2**255, MESSAGE),
    lambda pk, sig: bls_verify(pk[:47], MESSAGE, sig),
    lambda pk, sig: bls_verify(bytes(48), MESSAGE, sig),  # compression flag missing
    lambda pk, sig: bls_verify(pk, MESSAGE, sig[:95]),
    lambda pk, sig: bls_verify(pk, MESSAGE, b"\x9f" + bytes(95)),  # x not on the curve
    lambda pk, sig: bls_aggregate([]),
    lambda pk, sig: bls_aggregate_public_keys([]),
    lambda pk, sig: g1_to_eip2537(pk + b"\x00"),
    lambda pk, sig: g1_from_eip2537(bytes(127)),
    lambda pk, sig: g1_from_eip2537(b"\xff" * 128),  # not field elements
])
def test_malformed_input_raises_bls_error(call):
    (sk,), (pk,) = (s[:1] for s in keys())
    with pytest.raises(BlsError):
        call(pk, bls_sign(sk, MESSAGE))
