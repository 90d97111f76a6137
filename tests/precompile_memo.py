"""The EIP-2537 (BLS12-381) precompiles of py-evm, remembered by input within a test process.

py-evm computes them in pure Python (py_ecc): a pairing check costs about 2.7 s of CPU, and
the tests register the same deterministic validator keys (the same proof of possession) and
certify the same messages in world after world. A precompile is a pure function of its input,
so the first call's output and gas are kept and replayed: the bytes and the gas a contract sees
are the ones py-evm computed (tests/chain/test_precompile_memo.py compares them). Inputs the
precompile rejects are not kept; they are computed, and rejected, every time. Test-only: the
devnet's embedded chain never repeats an input, and anvil computes these natively.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from eth.vm.forks.prague.computation import PragueComputation

BLS12_ADDRESSES = tuple(bytes(19) + bytes([a]) for a in range(0x0B, 0x12))  # G1ADD .. MAP_FP2_TO_G2
Precompile = Callable[[Any], Any]


def _remembered(original: Precompile) -> Precompile:
    seen: dict[bytes, tuple[bytes, int]] = {}

    def precompile(computation: Any) -> Any:
        data = bytes(computation.msg.data)
        hit = seen.get(data)
        if hit is not None:
            output, gas = hit
            computation.consume_gas(gas, "remembered EIP-2537 precompile")  # out of gas exactly as py-evm
            computation.output = output
            return computation
        before = computation.get_gas_remaining()
        result = original(computation)  # raises for a rejected input: nothing is kept
        seen[data] = (bytes(computation.output), before - computation.get_gas_remaining())
        return result

    precompile.original = original  # type: ignore[attr-defined]
    return precompile


def install() -> None:
    """Remember the BLS12-381 precompiles of every py-evm chain made in this process (boa's
    and eth-tester's computations copy the Prague table per message); idempotent."""
    table = PragueComputation._precompiles
    for address in BLS12_ADDRESSES:
        if not hasattr(table[address], "original"):
            table[address] = _remembered(table[address])
