"""py-evm's EIP-2537 (BLS12-381) precompiles for the embedded chain: the same answers, sooner.

py-evm computes them in pure Python (py_ecc), and they were a third of a devnet's main-process
time: registering a validator checks its proof of possession and posting a result checks the
certificate, each a pairing check, and eth-tester executes every transaction three times (the
gas estimate, the pending block, the mined block). Two exact changes:

- the pairing check multiplies the Miller loops and raises the product to (p^12 - 1)/r once,
  with py_ecc's Frobenius-based `final_exponentiate`, where py-evm raises each pairing by plain
  square-and-multiply (four times the work for a two-pair check); the encoding, subgroup and
  curve checks and the gas are py-evm's;
- every precompile's answer is remembered by input (a pure function of it): output and gas are
  replayed, out of gas exactly where py-evm runs out; rejected inputs are never kept.

tests/chain/test_evm_precompiles.py compares both with py-evm's own precompiles. anvil and real
chains compute these natively; boa's test worlds get them through tests/conftest.py.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from eth.exceptions import VMError
from eth.precompiles.bls12_381.bls12_381_g1 import bytes_to_g1_optimized_point3D
from eth.precompiles.bls12_381.bls12_381_g2 import bytes_to_g2_optimized_point3D
from eth.vm.forks.prague.computation import PragueComputation
from py_ecc.optimized_bls12_381 import (
    FQ12,
    curve_order,
    final_exponentiate,
    is_inf,
    multiply,
    pairing,
)

BLS12_ADDRESSES = tuple(bytes(19) + bytes([a]) for a in range(0x0B, 0x12))  # G1ADD .. MAP_FP2_TO_G2
PAIRING_ADDRESS = BLS12_ADDRESSES[4]
PAIR_BYTES = 384  # one (G1, G2) pair: 128 + 256 bytes
REMEMBERED_INPUTS = 4096  # per precompile; a devnet certifies one message a round
Precompile = Callable[[Any], Any]


def pairing_check(computation: Any) -> Any:
    """BLS12_PAIRING_CHECK as py-evm computes it, with one final exponentiation for the product."""
    data = computation.msg.data
    if len(data) == 0 or len(data) % PAIR_BYTES != 0:
        raise VMError("Length of data must be a multiple of 384 bytes for BLS12_PAIRING_CHECK")
    k = len(data) // PAIR_BYTES
    computation.consume_gas(32600 * k + 37700, "BLS12_PAIRING_CHECK gas")
    product = FQ12.one()
    for start in range(0, len(data), PAIR_BYTES):
        g1_point = bytes_to_g1_optimized_point3D(data[start:start + 128])
        if not is_inf(multiply(g1_point, curve_order)):
            raise VMError("Sub-group check failed for G1 point.")
        g2_point = bytes_to_g2_optimized_point3D(data[start + 128:start + PAIR_BYTES])
        if not is_inf(multiply(g2_point, curve_order)):
            raise VMError("Sub-group check failed for G2 point.")
        product *= pairing(g2_point, g1_point, final_exponentiate=False)  # one() when a point is infinity
    computation.output = b"\x00" * 31 + (b"\x01" if final_exponentiate(product) == FQ12.one() else b"\x00")
    return computation


def _remembered(original: Precompile) -> Precompile:
    seen: OrderedDict[bytes, tuple[bytes, int]] = OrderedDict()

    def precompile(computation: Any) -> Any:
        data = bytes(computation.msg.data)
        hit = seen.get(data)
        if hit is not None:
            seen.move_to_end(data)
            output, gas = hit
            computation.consume_gas(gas, "remembered EIP-2537 precompile")  # out of gas exactly as py-evm
            computation.output = output
            return computation
        before = computation.get_gas_remaining()
        result = original(computation)  # raises for a rejected input: nothing is kept
        seen[data] = (bytes(computation.output), before - computation.get_gas_remaining())
        if len(seen) > REMEMBERED_INPUTS:
            seen.popitem(last=False)
        return result

    precompile.original = original  # type: ignore[attr-defined]
    return precompile


def install() -> None:
    """Use these in every py-evm chain made in this process (eth-tester's and boa's computations
    copy the Prague table per message); idempotent."""
    table = PragueComputation._precompiles
    for address in BLS12_ADDRESSES:
        if hasattr(table[address], "original"):
            continue
        faster = pairing_check if address == PAIRING_ADDRESS else table[address]
        remembered = _remembered(faster)
        remembered.py_evm = table[address]  # type: ignore[attr-defined]
        table[address] = remembered
