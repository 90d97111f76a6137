"""Clearing the G2 cofactor with the ψ endomorphism (RFC 9380, Appendix G.3): the same point as
py_ecc's `multiply(P, H_EFF_G2)`, from two 64-bit multiplications instead of one 636-bit one;
and the G2 membership test with ψ (Scott, "A note on group membership tests for G1, G2 and GT
on BLS pairing-friendly curves", 2021, §4): the same verdict as `multiply(P, r)` being infinity,
from one 64-bit multiplication instead of a 255-bit one.

Hashing to G2 clears the cofactor of every message point: the EVM's MAP_FP2_TO_G2 precompile
(twice per hashed message) and every signature. Points are py_ecc's optimized projective
(X, Y, Z) over FQ2, where x = X/Z and y = Y/Z; the points at infinity pass through.
"""

from __future__ import annotations

from py_ecc.optimized_bls12_381 import FQ2, add, double, eq, field_modulus, is_inf, multiply, neg
from py_ecc.typing import Optimized_Point3D

G2Point = Optimized_Point3D[FQ2]
BLS_X = 0xD201000000010000  # |x|, the BLS parameter of BLS12-381 (x itself is negative)
_PSI_X = FQ2.one() / FQ2([1, 1]) ** ((field_modulus - 1) // 3)  # 1 / (1 + I)^((p - 1)/3)
_PSI_Y = FQ2.one() / FQ2([1, 1]) ** ((field_modulus - 1) // 2)  # 1 / (1 + I)^((p - 1)/2)


def _conjugate(a: FQ2) -> FQ2:
    """The Frobenius map of FQ2: a0 + a1·I -> a0 - a1·I."""
    c0, c1 = a.coeffs
    return FQ2([c0, -c1])


def psi(point: G2Point) -> G2Point:
    """ψ(x, y) = (conj(x) / (1 + I)^((p-1)/3), conj(y) / (1 + I)^((p-1)/2)), in projective form
    (Z is conjugated too, so x = X/Z maps as x does)."""
    x, y, z = point
    return (_PSI_X * _conjugate(x), _PSI_Y * _conjugate(y), _conjugate(z))


def _times_x(point: G2Point) -> G2Point:
    return neg(multiply(point, BLS_X))


def clear_cofactor_g2(point: G2Point) -> G2Point:
    """h_eff · P, as [x² - x - 1]P + [x - 1]ψ(P) + ψ²(2P) (Budroni–Pintore), in RFC 9380's steps."""
    t1 = _times_x(point)
    t2 = psi(point)
    t3 = psi(psi(double(point)))
    t3 = add(t3, neg(t2))
    t2 = _times_x(add(t1, t2))
    t3 = add(add(t3, t2), neg(t1))
    return add(t3, neg(point))


def in_g2(point: G2Point) -> bool:
    """Whether a point of the twist E'(Fp2) is in G2 (order r): ψ(P) = [x]P holds exactly for
    those points on BLS12-381 (Scott 2021, §4; blst checks the same)."""
    return is_inf(point) or eq(psi(point), _times_x(point))
