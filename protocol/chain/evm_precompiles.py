"""py-evm's EIP-2537 (BLS12-381) precompiles for the embedded chain: the same answers, sooner.

py-evm computes them in pure Python (py_ecc), and they were the largest share of a devnet's
main-process time: registering a validator checks its proof of possession and posting a result
checks the certificate, each a pairing check, and eth-tester executes every transaction three
times (the gas estimate, the pending block, the mined block). Exact changes:

- the pairing check multiplies the Miller loops and raises the product to (p^12 - 1)/r once,
  with py_ecc's Frobenius-based `final_exponentiate`, where py-evm raises each pairing by plain
  square-and-multiply, and tests G2 membership with ψ(P) = [x]P (one 64-bit multiplication)
  where py-evm multiplies by the group order: 4.7× sooner for a two-pair check (`python -m
  benchmarks bls`); the encoding, the G1 subgroup and curve checks and the gas are py-evm's;
- MAP_FP2_TO_G2 clears the cofactor with the ψ endomorphism (protocol/core/crypto/g2_cofactor.py),
  to the same point as py-evm's 636-bit multiplication, 4.6× sooner;
- every precompile's answer is remembered by input (a pure function of it): output and gas are
  replayed, out of gas exactly where py-evm runs out; rejected inputs are never kept.

tests/chain/test_evm_precompiles.py compares both with py-evm's own precompiles. anvil and real
chains compute these natively; boa's test worlds get them through tests/conftest.py.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any, TypeVar

from eth.exceptions import VMError
from eth.precompiles.bls12_381.bls12_381_g1 import bytes_to_g1_optimized_point3D
from eth.precompiles.bls12_381.bls12_381_g2 import (
    BLS12_MAP_FP2_G2_GAS,
    bytes_to_fq2,
    bytes_to_g2_optimized_point3D,
    g2_optimized_3d_to_bytes,
)
from eth.vm.forks.prague.computation import PragueComputation
from py_ecc.bls.hash_to_curve import map_to_curve_G2
from py_ecc.optimized_bls12_381 import (
    FQ12,
    curve_order,
    final_exponentiate,
    is_inf,
    multiply,
    pairing,
)

from protocol.core.crypto.g2_cofactor import clear_cofactor_g2, in_g2

BLS12_ADDRESSES = tuple(bytes(19) + bytes([a]) for a in range(0x0B, 0x12))  # G1ADD .. MAP_FP2_TO_G2
PAIRING_ADDRESS, MAP_FP2_ADDRESS = BLS12_ADDRESSES[4], BLS12_ADDRESSES[6]
PAIR_BYTES = 384  # one (G1, G2) pair: 128 + 256 bytes
REMEMBERED_INPUTS = 4096  # per precompile; a devnet certifies one message a round
Precompile = Callable[[Any], Any]
P = TypeVar("P")


def _decoded(point: P | None) -> P:
    """py-evm's decoders are typed Optional but raise rather than return None."""
    if point is None:
        raise VMError("not a point")
    return point


def pairing_check(computation: Any) -> Any:
    """BLS12_PAIRING_CHECK as py-evm computes it, with one final exponentiation for the product."""
    data = computation.msg.data
    if len(data) == 0 or len(data) % PAIR_BYTES != 0:
        raise VMError("Length of data must be a multiple of 384 bytes for BLS12_PAIRING_CHECK")
    k = len(data) // PAIR_BYTES
    computation.consume_gas(32600 * k + 37700, "BLS12_PAIRING_CHECK gas")
    product = FQ12.one()
    for start in range(0, len(data), PAIR_BYTES):
        g1_point = _decoded(bytes_to_g1_optimized_point3D(data[start:start + 128]))
        if not is_inf(multiply(g1_point, curve_order)):
            raise VMError("Sub-group check failed for G1 point.")
        g2_point = _decoded(bytes_to_g2_optimized_point3D(data[start + 128:start + PAIR_BYTES]))
        if not in_g2(g2_point):  # ψ(P) = [x]P: what multiply(P, r) = O decides, in 64 bits
            raise VMError("Sub-group check failed for G2 point.")
        product *= pairing(g2_point, g1_point, final_exponentiate=False)  # one() when a point is infinity
    computation.output = b"\x00" * 31 + (b"\x01" if final_exponentiate(product) == FQ12.one() else b"\x00")
    return computation


def map_fp2_to_g2(computation: Any) -> Any:
    """BLS12_MAP_FP2_TO_G2 as py-evm computes it, the cofactor cleared with ψ."""
    data = computation.msg.data
    if len(data) != 128:
        raise VMError("Length of data must be 128 bytes for BLS12_MAP_FP2_TO_G2")
    computation.consume_gas(BLS12_MAP_FP2_G2_GAS, "BLS12_MAP_FP2_TO_G2 gas")
    computation.output = g2_optimized_3d_to_bytes(clear_cofactor_g2(map_to_curve_G2(bytes_to_fq2(data))))
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
        faster = {PAIRING_ADDRESS: pairing_check, MAP_FP2_ADDRESS: map_fp2_to_g2}.get(address, table[address])
        remembered = _remembered(faster)
        remembered.py_evm = table[address]  # type: ignore[attr-defined]
        table[address] = remembered
