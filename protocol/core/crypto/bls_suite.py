"""py_ecc's IETF proof-of-possession ciphersuite, hashing to G2 with the ψ cofactor clearing.

py_ecc's `hash_to_G2` clears the cofactor with a 636-bit multiplication, most of the time of
a signature, a proof of possession or a verification. `PopSuite` is py_ecc's
`G2ProofOfPossession` with its two core steps (sign, verify) hashing through
`clear_cofactor_g2`, which gives the same point: keys, signatures and verdicts are py_ecc's,
bit for bit (tests/core/test_bls.py compares them). Everything else (key generation, key
validation, aggregation, FastAggregateVerify, PopProve/PopVerify) is py_ecc's, and reaches
these two steps through the class.
"""

from __future__ import annotations

from hashlib import sha256

from py_ecc.bls import G2ProofOfPossession
from py_ecc.bls.g2_primitives import (
    BLSPubkey,
    BLSSignature,
    G2_to_signature,
    pubkey_to_G1,
    signature_to_G2,
    subgroup_check,
)
from py_ecc.bls.hash_to_curve import hash_to_field_FQ2, map_to_curve_G2
from py_ecc.bls.typing import G2Uncompressed
from py_ecc.optimized_bls12_381 import FQ12, G1, add, final_exponentiate, multiply, neg, pairing

from protocol.core.crypto.g2_cofactor import clear_cofactor_g2


def hash_to_g2(message: bytes, dst: bytes) -> G2Uncompressed:
    """RFC 9380's BLS12381G2_XMD:SHA-256_SSWU_RO_ hash, as py_ecc's `hash_to_G2` computes it."""
    # py_ecc types the hash as a HASH object but calls it, as its own ciphersuites pass sha256
    u0, u1 = hash_to_field_FQ2(message, 2, dst, sha256)  # type: ignore[arg-type]
    return clear_cofactor_g2(add(map_to_curve_G2(u0), map_to_curve_G2(u1)))


class PopSuite(G2ProofOfPossession):
    @classmethod
    def _CoreSign(cls, SK: int, message: bytes, DST: bytes) -> BLSSignature:  # noqa: N802, N803 (py_ecc's names)
        if not cls._is_valid_privkey(SK) or not cls._is_valid_message(message):
            return super()._CoreSign(SK, message, DST)  # py_ecc raises its own error
        return G2_to_signature(multiply(hash_to_g2(message, DST), SK))

    @classmethod
    def _CoreVerify(cls, PK: BLSPubkey, message: bytes, signature: BLSSignature,  # noqa: N802, N803
                    DST: bytes) -> bool:
        valid_inputs = cls._is_valid_pubkey(PK) and cls._is_valid_message(message) and cls._is_valid_signature(signature)
        if not valid_inputs or not cls.KeyValidate(PK):
            return False
        try:
            signature_point = signature_to_G2(signature)
            if not subgroup_check(signature_point):
                return False
            product = (pairing(signature_point, G1, final_exponentiate=False)
                       * pairing(hash_to_g2(message, DST), neg(pubkey_to_G1(PK)), final_exponentiate=False))
            return bool(final_exponentiate(product) == FQ12.one())
        except (ValueError, AssertionError):  # py_ecc's decoders reject malformed points this way
            return False
