"""The test processes' remembered EIP-2537 precompiles (tests/precompile_memo.py) return the
bytes and charge the gas py-evm computes, run out of gas where py-evm does, and never keep a
rejected input."""

from __future__ import annotations

import boa
import pytest
from eth.vm.forks.prague.computation import PragueComputation
from py_ecc.bls12_381 import G1, add, neg

from tests.precompile_memo import BLS12_ADDRESSES, install

G1ADD, PAIRING = BLS12_ADDRESSES[0], BLS12_ADDRESSES[4]


def g1(point) -> bytes:  # type: ignore[no-untyped-def]
    return b"".join(c.n.to_bytes(64, "big") for c in point)


def call(data: bytes, gas: int = 100_000):  # type: ignore[no-untyped-def]
    with boa.env.anchor():
        return boa.env.execute_code(to_address=G1ADD, data=data, gas=gas)


@pytest.fixture
def raw_g1add():  # type: ignore[no-untyped-def]
    """The py-evm precompile for the test, remembered again after it."""
    table = PragueComputation._precompiles
    remembered = table[G1ADD]
    table[G1ADD] = remembered.original
    yield
    table[G1ADD] = remembered


def test_every_bls12_precompile_is_remembered_in_the_test_process():
    install()
    assert all(hasattr(PragueComputation._precompiles[a], "original") for a in BLS12_ADDRESSES)
    assert PragueComputation._precompiles[PAIRING].original.__name__ == "bls12_pairing_check"


def test_a_remembered_call_returns_and_charges_what_py_evm_computes(raw_g1add):
    data = g1(G1) + g1(add(G1, G1))
    py_evm = call(data)
    install()
    first, again = call(data), call(data)  # computed, then remembered
    assert not py_evm.is_error and py_evm.output == g1(add(G1, add(G1, G1)))
    assert [c.output for c in (first, again)] == [py_evm.output] * 2
    assert [c.get_gas_used() for c in (first, again)] == [py_evm.get_gas_used()] * 2


def test_a_remembered_call_runs_out_of_gas_where_py_evm_does(raw_g1add):
    data = g1(G1) + g1(neg(G1))
    needed = call(data).get_gas_used()
    install()
    assert not call(data).is_error  # now remembered
    short = call(data, gas=needed - 1)
    assert short.is_error and short.output == b""


def test_a_rejected_input_is_rejected_every_time(raw_g1add):
    install()
    bad = g1(G1)[:-1] + b"\x01" + g1(G1)  # not a point on the curve
    assert call(bad).is_error and call(bad).is_error
    assert call(g1(G1) + g1(G1)).output == g1(add(G1, G1))  # and a good one still answers
