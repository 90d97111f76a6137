# pragma version ~=0.4.3
# pragma evm-version prague
# SPDX-License-Identifier: AGPL-3.0-only
"""
@title veritrain BLS12-381 verification over the EIP-2537 precompiles
@custom:contract-name bls
@license GNU Affero General Public License v3.0 only
@notice A stateless module (`from . import bls`, then `bls._verify(...)`) for the IETF
        BLS signature scheme with proofs of possession, keys in G1 and signatures in G2,
        as py_ecc's `G2ProofOfPossession` signs. Points use the EIP-2537 layout: a field
        element is 64 bytes (16 zero bytes, then 48 big-endian), a G1 point (x, y) 128
        bytes, a G2 point (x.c0, x.c1, y.c0, y.c1) 256 bytes; the point at infinity is all
        zeros. Hashing to G2 follows RFC 9380 (expand_message_xmd with SHA-256, two field
        elements mapped by MAP_FP2_TO_G2, which also clears the cofactor, then added).
        Revert strings are prefixed "bls: ".
"""

# the ciphersuite's signature tag (docs/PROTOCOL.md §11, BLS certificate); proofs of possession
# use BlsKeys' own bound tag
DST_SIG: constant(Bytes[43]) = b"BLS_SIG_BLS12381G2_XMD:SHA-256_SSWU_RO_POP_"
MAX_MESSAGE: constant(uint256) = 64  # a result root or a bound key digest (32 bytes)
MAX_DST: constant(uint256) = 64

MODEXP: constant(address) = 0x0000000000000000000000000000000000000005
G1ADD: constant(address) = 0x000000000000000000000000000000000000000b
G2ADD: constant(address) = 0x000000000000000000000000000000000000000d
PAIRING: constant(address) = 0x000000000000000000000000000000000000000F
MAP_FP2_TO_G2: constant(address) = 0x0000000000000000000000000000000000000011
# EIP-2537 charges 32600 per pair + 37700 for two pairs: a failing precompile burns all
# the gas it is given, so a garbage signature costs at most this much, not the whole call
PAIRING_GAS: constant(uint256) = 32600 * 2 + 37700
CALL_OVERHEAD_GAS: constant(uint256) = 5_000  # the CALL itself and copying its output back

# the base field modulus p as two 256-bit limbs of its 64-byte encoding, and (p - 1) / 2
P_HI: constant(uint256) = 34565483545414906068789196026815425751  # 0x1a0111ea397fe69a4b1ba7b6434bacd7
P_LO: constant(uint256) = 45442060874369865957053122457065728162598490762543039060009208264153100167851  # 0x64774b84f38512bf6730d2a0f6b0f6241eabfffeb153ffffb9feffffffffaaab
HALF_HI: constant(uint256) = 17282741772707453034394598013407712875  # 0x0d0088f51cbff34d258dd3db21a5d66b
HALF_LO: constant(uint256) = 80617075055843030690312053732876818007934237714091801549733396136033114903893  # 0xb23ba5c279c2895fb39869507b587b120f55ffff58a9ffffdcff7fffffffd555
# -G1 (the negated generator): e(pk, H(m)) * e(-G1, sig) == 1 iff e(pk, H(m)) == e(G1, sig)
NEG_G1: constant(Bytes[128]) = x"0000000000000000000000000000000017f1d3a73197d7942695638c4fa9ac0fc3688c4f9774b905a14e3a3f171bac586c55e83ff97a1aeffb3af00adb22c6bb00000000000000000000000000000000114d1d6855d545a8aa7d76c8cf2e21f267816aef1db507c96655b9d5caac42364e6f38ba0ecb751bad54dcd6b939c2ca"
# ZCash compressed-point flags in the top byte of x
COMPRESSED_FLAG: constant(uint256) = 128  # 0x80
INFINITY_FLAG: constant(uint256) = 64  # 0x40
SIGN_FLAG: constant(uint256) = 32  # 0x20
TOP_BYTE_SHIFT: constant(uint256) = 120  # x's first byte is byte 16 of its 32-byte high limb


@internal
@view
def _verify(pk: Bytes[128], message: Bytes[MAX_MESSAGE], sig: Bytes[256], dst: Bytes[MAX_DST]) -> bool:
    """
    @dev Whether `sig` signs `message` under `pk` with tag `dst`. The pairing precompile
         rejects points off the curve or outside the subgroup, so a malformed key or
         signature gives False; it reverts only when too little gas is left to pair.
         PAIRING_GAS is EIP-2537's price: a fork that raises it needs a new module.
         An infinity key verifies an infinity
         signature of anything: callers must refuse infinity keys (BlsKeys does).
    """
    if len(pk) != 128 or len(sig) != 256:
        return False
    pairs: Bytes[768] = concat(pk, self._hash_to_g2(message, dst), NEG_G1, sig)
    # a pairing starved of gas would fail like a bad signature: make that a revert, so that
    # no caller can turn a valid signature into False by sending too little gas
    assert msg.gas > PAIRING_GAS * 64 // 63 + CALL_OVERHEAD_GAS, "bls: out of gas for the pairing"
    ok: bool = False
    out: Bytes[32] = b""
    ok, out = raw_call(
        PAIRING, pairs, max_outsize=32, gas=PAIRING_GAS, is_static_call=True, revert_on_failure=False,
    )
    if not ok or len(out) != 32:
        return False
    return extract32(out, 0, output_type=uint256) == 1


@internal
@view
def _hash_to_g2(message: Bytes[MAX_MESSAGE], dst: Bytes[MAX_DST]) -> Bytes[256]:
    """
    @dev RFC 9380 hash_to_curve for G2: the 256 uniform bytes b_1..b_8 are the four
         64-byte integers reduced to u0 = (b_1||b_2, b_3||b_4), u1 = (b_5||b_6, b_7||b_8).
    """
    b: bytes32[8] = self._expand_message_xmd(message, dst)
    q0: Bytes[256] = self._map_fp2(concat(self._fp_mod(b[0], b[1]), self._fp_mod(b[2], b[3])))
    q1: Bytes[256] = self._map_fp2(concat(self._fp_mod(b[4], b[5]), self._fp_mod(b[6], b[7])))
    return self._precompile_256(G2ADD, concat(q0, q1))


@internal
@view
def _g1_add(a: Bytes[128], b: Bytes[128]) -> Bytes[128]:
    """
    @dev The sum of two G1 points (G1ADD checks both are on the curve, not the subgroup).
    """
    ok: bool = False
    out: Bytes[128] = b""
    ok, out = raw_call(G1ADD, concat(a, b), max_outsize=128, is_static_call=True, revert_on_failure=False)
    assert ok and len(out) == 128, "bls: G1 addition failed"
    return out


@internal
@pure
def _g1_neg(a: Bytes[128]) -> Bytes[128]:
    """
    @dev -a = (x, p - y); the point at infinity (y = 0) is its own negation.
    """
    assert len(a) == 128, "bls: a G1 point is 128 bytes"
    y_hi: uint256 = extract32(a, 64, output_type=uint256)
    y_lo: uint256 = extract32(a, 96, output_type=uint256)
    if y_hi == 0 and y_lo == 0:
        return a
    borrow: uint256 = 0
    if y_lo > P_LO:
        borrow = 1
    # checked subtraction on the high limb: reverts for y >= p, which is not a field element
    neg_hi: uint256 = P_HI - y_hi - borrow
    return concat(slice(a, 0, 64), convert(neg_hi, bytes32), convert(unsafe_sub(P_LO, y_lo), bytes32))


@internal
@pure
def _compress_g1(a: Bytes[128]) -> Bytes[48]:
    """
    @dev The 48-byte ZCash compression py_ecc uses for keys (and signs in a proof of
         possession): x with 0x80 set, 0x20 when y > (p - 1) / 2, 0xc0 alone for infinity.
    """
    assert len(a) == 128, "bls: a G1 point is 128 bytes"
    x_hi: uint256 = extract32(a, 0, output_type=uint256)
    x_lo: bytes32 = extract32(a, 32)
    y_hi: uint256 = extract32(a, 64, output_type=uint256)
    y_lo: uint256 = extract32(a, 96, output_type=uint256)
    flags: uint256 = COMPRESSED_FLAG
    if x_hi == 0 and x_lo == empty(bytes32) and y_hi == 0 and y_lo == 0:
        flags |= INFINITY_FLAG
    elif y_hi > HALF_HI or (y_hi == HALF_HI and y_lo > HALF_LO):
        flags |= SIGN_FLAG
    return slice(concat(convert(x_hi | (flags << TOP_BYTE_SHIFT), bytes32), x_lo), 16, 48)


@internal
@pure
def _is_infinity(a: Bytes[128]) -> bool:
    """
    @dev Whether `a` encodes the G1 point at infinity (128 zero bytes).
    """
    return a == concat(empty(bytes32), empty(bytes32), empty(bytes32), empty(bytes32))


@internal
@pure
def _expand_message_xmd(message: Bytes[MAX_MESSAGE], dst: Bytes[MAX_DST]) -> bytes32[8]:
    """
    @dev RFC 9380 §5.3.1 with SHA-256 for 256 bytes: b_0 = H(Z_pad || msg || I2OSP(256, 2)
         || 0x00 || DST'), b_1 = H(b_0 || 0x01 || DST'), b_i = H((b_0 ^ b_(i-1)) || i || DST').
    """
    dst_prime: Bytes[MAX_DST + 1] = concat(dst, self._byte(len(dst)))
    b0: uint256 = convert(
        sha256(concat(empty(bytes32), empty(bytes32), message, b"\x01\x00\x00", dst_prime)), uint256)
    b: bytes32[8] = empty(bytes32[8])
    b[0] = sha256(concat(convert(b0, bytes32), b"\x01", dst_prime))
    for i: uint256 in range(1, 8):
        b[i] = sha256(concat(convert(b0 ^ convert(b[i - 1], uint256), bytes32), self._byte(i + 1), dst_prime))
    return b


@internal
@view
def _fp_mod(hi: bytes32, lo: bytes32) -> Bytes[64]:
    """
    @dev The 64-byte integer hi || lo reduced mod p, as an EIP-2537 field element, by
         MODEXP with exponent 1 (base 64 bytes, exponent 1 byte, modulus 64 bytes).
    """
    ok: bool = False
    out: Bytes[64] = b""
    ok, out = raw_call(
        MODEXP,
        concat(convert(64, bytes32), convert(1, bytes32), convert(64, bytes32), hi, lo, b"\x01",
               convert(P_HI, bytes32), convert(P_LO, bytes32)),
        max_outsize=64, is_static_call=True, revert_on_failure=False,
    )
    assert ok and len(out) == 64, "bls: modexp failed"
    return out


@internal
@view
def _map_fp2(u: Bytes[128]) -> Bytes[256]:
    """
    @dev MAP_FP2_TO_G2 (simplified SWU, isogeny, cofactor clearing) of u = (c0, c1).
    """
    return self._precompile_256(MAP_FP2_TO_G2, u)


@internal
@view
def _precompile_256(target: address, data: Bytes[512]) -> Bytes[256]:
    """
    @dev A G2-valued precompile call that must succeed with a whole point.
    """
    ok: bool = False
    out: Bytes[256] = b""
    ok, out = raw_call(target, data, max_outsize=256, is_static_call=True, revert_on_failure=False)
    assert ok and len(out) == 256, "bls: G2 precompile failed"
    return out


@internal
@pure
def _byte(n: uint256) -> Bytes[1]:
    """
    @dev I2OSP(n, 1).
    """
    return slice(convert(n, bytes32), 31, 1)
