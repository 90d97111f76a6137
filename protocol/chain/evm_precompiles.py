"""py-evm's EIP-2537 (BLS12-381) precompiles for the embedded chain: the same answers, sooner.

py-evm computes them in pure Python (py_ecc), and they were the largest share of a devnet's
main-process time: registering a validator checks its proof of possession and posting a result
checks the certificate, each a pairing check, and eth-tester executes every transaction three
times (the gas estimate, the pending block, the mined block). Exact changes:

- the pairing check decodes each point with py-evm's own decoders (the encoding, field and
  curve checks and their errors) and charges py-evm's gas, then checks both subgroups and the
  product of the pairings natively with arkworks (py-arkworks-bls12381), where py-evm multiplies
  each point by the group order and raises each pairing to (p^12 - 1)/r in pure Python: a
  two-pair check takes milliseconds instead of about a second (`python -m benchmarks bls`);
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
from py_arkworks_bls12381 import GT, G1Point, G2Point
from py_ecc.bls.hash_to_curve import map_to_curve_G2
from py_ecc.optimized_bls12_381 import (
    is_inf,
)

from protocol.core.crypto.g2_cofactor import clear_cofactor_g2

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


def _affine(encoded: bytes) -> bytes:
    """An EIP-2537 point's coordinates without their 16 zero bytes of padding each (py-evm's
    decoder has checked the padding, the field and the curve): arkworks' big-endian x ‖ y, with
    x = c0 ‖ c1 in G2 as in EIP-2537."""
    return b"".join(encoded[k + 16:k + 64] for k in range(0, len(encoded), 64))


def pairing_check(computation: Any) -> Any:
    """BLS12_PAIRING_CHECK with py-evm's encoding and curve checks, errors and gas, and the
    subgroup checks and the pairing product computed natively by arkworks."""
    data = computation.msg.data
    if len(data) == 0 or len(data) % PAIR_BYTES != 0:
        raise VMError("Length of data must be a multiple of 384 bytes for BLS12_PAIRING_CHECK")
    k = len(data) // PAIR_BYTES
    computation.consume_gas(32600 * k + 37700, "BLS12_PAIRING_CHECK gas")
    g1s: list[G1Point] = []
    g2s: list[G2Point] = []
    for start in range(0, len(data), PAIR_BYTES):
        g1_bytes, g2_bytes = bytes(data[start:start + 128]), bytes(data[start + 128:start + PAIR_BYTES])
        g1_infinite = is_inf(_decoded(bytes_to_g1_optimized_point3D(g1_bytes)))
        g1_point = G1Point.identity() if g1_infinite else G1Point.from_xy_bytes_unchecked_be(_affine(g1_bytes))
        if not g1_point.is_in_subgroup():
            raise VMError("Sub-group check failed for G1 point.")
        g2_infinite = is_inf(_decoded(bytes_to_g2_optimized_point3D(g2_bytes)))
        g2_point = G2Point.identity() if g2_infinite else G2Point.from_xy_bytes_unchecked_be(_affine(g2_bytes))
        if not g2_point.is_in_subgroup():
            raise VMError("Sub-group check failed for G2 point.")
        if not (g1_infinite or g2_infinite):  # a pair with a point at infinity contributes 1
            g1s.append(g1_point)
            g2s.append(g2_point)
    holds = not g1s or GT.pairing_check(g1s, g2s)
    computation.output = b"\x00" * 31 + (b"\x01" if holds else b"\x00")
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
