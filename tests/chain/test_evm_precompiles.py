"""The embedded chain's EIP-2537 precompiles (protocol/chain/evm_precompiles.py) answer as py-evm's
own do: the same bytes and gas for a remembered call, out of gas where py-evm runs out, a rejected
input rejected every time, and the pairing check's verdict, gas and errors those of py-evm's."""

from __future__ import annotations

import boa
import pytest
from eth.vm.forks.prague.computation import PragueComputation
from py_ecc.bls.hash_to_curve import map_to_curve_G2
from py_ecc.optimized_bls12_381 import FQ2, G1, G2, add, field_modulus, multiply, neg, normalize

from protocol.chain.evm_precompiles import BLS12_ADDRESSES, PAIRING_ADDRESS, install

G1ADD = BLS12_ADDRESSES[0]


def g1(point) -> bytes:  # type: ignore[no-untyped-def]
    return b"".join(c.n.to_bytes(64, "big") for c in normalize(point))


def g2(point) -> bytes:  # type: ignore[no-untyped-def]
    return b"".join(int(c).to_bytes(64, "big") for xy in normalize(point) for c in xy.coeffs)


def call(data: bytes, to: bytes = G1ADD, gas: int = 1_000_000):  # type: ignore[no-untyped-def]
    with boa.env.anchor():
        return boa.env.execute_code(to_address=to, data=data, gas=gas)


@pytest.fixture
def py_evm_table():  # type: ignore[no-untyped-def]
    """py-evm's own precompiles for the test, the embedded chain's again after it."""
    install()
    table = PragueComputation._precompiles
    ours = {a: table[a] for a in BLS12_ADDRESSES}
    for address in BLS12_ADDRESSES:
        table[address] = ours[address].py_evm
    yield
    table.update(ours)


def test_every_bls12_precompile_is_replaced_and_the_pairing_check_and_map_computed_anew():
    install()
    table = PragueComputation._precompiles
    assert all(hasattr(table[a], "original") for a in BLS12_ADDRESSES)
    assert table[PAIRING_ADDRESS].py_evm.__module__.startswith("eth.precompiles")
    assert table[PAIRING_ADDRESS].original.__module__ == "protocol.chain.evm_precompiles"
    assert table[BLS12_ADDRESSES[6]].original.__name__ == "map_fp2_to_g2"


def test_a_remembered_call_returns_and_charges_what_py_evm_computes(py_evm_table):
    data = g1(G1) + g1(add(G1, G1))
    py_evm = call(data)
    install()
    first, again = call(data), call(data)  # computed, then remembered
    assert not py_evm.is_error and py_evm.output == g1(add(G1, add(G1, G1)))
    assert [c.output for c in (first, again)] == [py_evm.output] * 2
    assert [c.get_gas_used() for c in (first, again)] == [py_evm.get_gas_used()] * 2


def test_a_remembered_call_runs_out_of_gas_where_py_evm_does(py_evm_table):
    data = g1(G1) + g1(neg(G1))
    needed = call(data).get_gas_used()
    install()
    assert not call(data).is_error  # now remembered
    short = call(data, gas=needed - 1)
    assert short.is_error and short.output == b""


def test_a_rejected_input_is_rejected_every_time():
    install()
    bad = g1(G1)[:-1] + b"\x01" + g1(G1)  # not a point on the curve
    assert call(bad).is_error and call(bad).is_error
    assert call(g1(G1) + g1(G1)).output == g1(add(G1, G1))  # and a good one still answers


INFINITY_G1, INFINITY_G2 = bytes(128), bytes(256)


def _outside_g1() -> bytes:
    """The first point of y^2 = x^3 + 4 over Fp by x, which lies outside the r-torsion G1 (the
    curve's cofactor is about 2^126)."""
    x = 1
    while pow(x**3 + 4, (field_modulus - 1) // 2, field_modulus) != 1:
        x += 1
    y = pow(x**3 + 4, (field_modulus + 1) // 4, field_modulus)  # p = 3 mod 4
    return x.to_bytes(64, "big") + y.to_bytes(64, "big")


PAIRING_INPUTS = {
    "e(aP, Q) e(-P, aQ) = 1": g1(multiply(G1, 7)) + g2(G2) + g1(neg(G1)) + g2(multiply(G2, 7)),
    "e(aP, Q) e(-P, bQ) != 1": g1(multiply(G1, 7)) + g2(G2) + g1(neg(G1)) + g2(multiply(G2, 8)),
    "one pair, != 1": g1(G1) + g2(G2),
    "infinity in G1": INFINITY_G1 + g2(G2),
    "infinity in G2, then a pair != 1": g1(G1) + INFINITY_G2 + g1(G1) + g2(G2),
    "three pairs, = 1": g1(G1) + g2(G2) + g1(G1) + g2(G2) + g1(multiply(G1, 2)) + g2(neg(G2)),
    "no pair": b"",
    "a short pair": (g1(G1) + g2(G2))[:-1],
    "G1 not on the curve": g1(G1)[:-1] + b"\x05" + g2(G2),
    "G2 on the curve, outside G2": g1(G1) + g2(map_to_curve_G2(FQ2([7, 11]))),
    "G1 on the curve, outside G1": _outside_g1() + g2(G2),
}


def _answers() -> dict[str, tuple[bool, bytes, int]]:
    answers = {}
    for name, data in PAIRING_INPUTS.items():
        c = call(data, to=PAIRING_ADDRESS, gas=500_000)
        answers[name] = (c.is_error, bytes(c.output), c.get_gas_used())
    return answers


def test_the_pairing_check_answers_and_charges_as_py_evm_does(py_evm_table):
    py_evm = _answers()
    install()
    ours = _answers()
    assert ours == py_evm
    one, zero = b"\x00" * 31 + b"\x01", b"\x00" * 32
    assert [py_evm[n][1] for n in ("e(aP, Q) e(-P, aQ) = 1", "three pairs, = 1", "infinity in G1")] == [one] * 3
    assert [py_evm[n][1] for n in ("e(aP, Q) e(-P, bQ) != 1", "one pair, != 1")] == [zero] * 2
    assert all(py_evm[n][0] for n in ("no pair", "a short pair", "G1 not on the curve", "G2 on the curve, outside G2",
                                      "G1 on the curve, outside G1"))


MAP_INPUTS = [(7).to_bytes(64, "big") + (11).to_bytes(64, "big"), bytes(128), (field_modulus - 1).to_bytes(64, "big") * 2,
              (2**383).to_bytes(64, "big") + bytes(64), bytes(127)]  # the last two are rejected


def test_map_fp2_to_g2_answers_and_charges_as_py_evm_does(py_evm_table):
    def answers():  # type: ignore[no-untyped-def]
        return [(c.is_error, bytes(c.output), c.get_gas_used())
                for c in (call(data, to=BLS12_ADDRESSES[6], gas=200_000) for data in MAP_INPUTS)]

    py_evm = answers()
    install()
    assert answers() == py_evm
    assert [e for e, _, _ in py_evm] == [False, False, False, True, True]
