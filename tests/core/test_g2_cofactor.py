"""The ψ-endomorphism cofactor clearing gives the point py_ecc's 636-bit multiplication gives, and
the ψ membership test the verdict of multiplying by the group order."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from py_ecc.bls.hash_to_curve import map_to_curve_G2
from py_ecc.optimized_bls12_381 import (
    FQ2,
    G2,
    Z2,
    add,
    b2,
    curve_order,
    field_modulus,
    is_inf,
    is_on_curve,
    multiply,
    normalize,
)
from py_ecc.optimized_bls12_381.constants import H_EFF_G2

from protocol.core.crypto.g2_cofactor import clear_cofactor_g2, in_g2, psi

field_elements = st.integers(min_value=0, max_value=field_modulus - 1)


@settings(max_examples=6, deadline=None)
@given(field_elements, field_elements)
def test_clearing_with_psi_is_the_multiplication_by_h_eff(c0: int, c1: int) -> None:
    point = map_to_curve_G2(FQ2([c0, c1]))  # on the curve, almost surely outside G2
    cleared = clear_cofactor_g2(point)
    assert normalize(cleared) == normalize(multiply(point, H_EFF_G2))
    assert is_on_curve(cleared, b2) and is_inf(multiply(cleared, curve_order))


def test_psi_acts_on_g2_as_multiplication_by_the_frobenius_eigenvalue() -> None:
    """On G2, ψ is [p mod r]: a wrong constant or a missed conjugation fails here."""
    assert normalize(psi(G2)) == normalize(multiply(G2, field_modulus % curve_order))
    assert is_inf(clear_cofactor_g2(Z2))


def _in_g2_by_order(point) -> bool:  # type: ignore[no-untyped-def]
    return is_inf(multiply(point, curve_order))


@settings(max_examples=6, deadline=None)
@given(field_elements, field_elements, st.integers(min_value=1, max_value=curve_order - 1))
def test_the_psi_membership_test_is_the_multiplication_by_the_group_order(c0: int, c1: int, k: int) -> None:
    """Points of G2, points of the twist outside it, points whose order divides the cofactor
    (a torsion point alone) and G2 points shifted by one: each verdict is py_ecc's."""
    on_twist = map_to_curve_G2(FQ2([c0, c1]))  # almost surely of order r·h', outside G2
    torsion = multiply(on_twist, curve_order)  # order divides the cofactor: never in G2 unless O
    in_group = multiply(G2, k)
    for point, expected in ((in_group, True), (clear_cofactor_g2(on_twist), True), (on_twist, False),
                            (torsion, is_inf(torsion)), (add(in_group, torsion), is_inf(torsion)), (Z2, True)):
        assert in_g2(point) == _in_g2_by_order(point) == expected
