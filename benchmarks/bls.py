"""BLS12-381: py-evm's and py_ecc's own code against veritrain's exact equivalents.

    python -m benchmarks bls [--quick] [--json PATH]

Side by side in one process, trials alternating which goes first: the EIP-2537 pairing check of
two pairs (a proof of possession or a certificate on chain) and MAP_FP2_TO_G2 as py-evm computes
them and as the embedded chain does (protocol/chain/evm_precompiles.py), and a signature, a proof
of possession and a verification as py_ecc's G2ProofOfPossession computes them and as
protocol/core/crypto/bls.py does. Each pair gives the same bytes (checked here); the figures are
the median seconds of each and the median paired ratio (py_ecc or py-evm over veritrain).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eth.precompiles.bls12_381.bls12_381_g2 import bls12_map_fp2_to_g2
from eth.precompiles.bls12_381.bls12_381_pairing import bls12_pairing_check
from py_ecc.bls import G2ProofOfPossession
from py_ecc.bls.g2_primitives import BLSPubkey, BLSSignature
from py_ecc.optimized_bls12_381 import G1, G2, multiply, neg, normalize
from rich.console import Console
from rich.table import Table

from protocol.chain.evm_precompiles import map_fp2_to_g2, pairing_check
from protocol.core.crypto.bls import (
    DST_POP_BOUND,
    bls_bound_pop_prove,
    bls_public_key,
    bls_sign,
    bls_verify,
    bound_pop_message,
)

SECRET, MESSAGE = 0x1234_5678_9ABC_DEF0_1234_5678_9ABC_DEF0, b"\x5a" * 32
OWNER, KEYS_CONTRACT = b"\x11" * 20, b"\x22" * 20  # a registering account and a BlsKeys address


@dataclass
class _Message:
    data: bytes


@dataclass
class _Call:
    """What a precompile reads and writes of py-evm's computation: its input, gas and output."""

    msg: _Message
    output: bytes = b""
    gas: list[int] = field(default_factory=list)

    def consume_gas(self, amount: int, _reason: str) -> None:
        self.gas.append(amount)


def _fp(value: int) -> bytes:
    return int(value).to_bytes(64, "big")


def _pairing_input() -> bytes:
    """e(7·G1, G2) · e(−G1, 7·G2) = 1, EIP-2537 encoded."""
    def g1(p) -> bytes:  # type: ignore[no-untyped-def]
        return b"".join(_fp(c) for c in normalize(p))

    def g2(p) -> bytes:  # type: ignore[no-untyped-def]
        return b"".join(_fp(c) for xy in normalize(p) for c in xy.coeffs)

    return g1(multiply(G1, 7)) + g2(G2) + g1(neg(G1)) + g2(multiply(G2, 7))


def _precompile(fn: Callable[[Any], object], data: bytes) -> Callable[[], bytes]:
    def run() -> bytes:
        call = _Call(_Message(data))
        fn(call)
        return call.output
    return run


def cases() -> dict[str, tuple[Callable[[], object], Callable[[], object]]]:
    """name -> (py-evm's or py_ecc's, veritrain's)."""
    pk, sig = BLSPubkey(bls_public_key(SECRET)), BLSSignature(bls_sign(SECRET, MESSAGE))
    map_input = _fp(7) + _fp(11)
    bound = bound_pop_message(bls_public_key(SECRET), OWNER, 1, KEYS_CONTRACT)  # what a registration signs
    return {
        "EIP-2537 pairing check, 2 pairs": (_precompile(bls12_pairing_check, _pairing_input()),
                                            _precompile(pairing_check, _pairing_input())),
        "EIP-2537 MAP_FP2_TO_G2": (_precompile(bls12_map_fp2_to_g2, map_input), _precompile(map_fp2_to_g2, map_input)),
        "sign": (lambda: G2ProofOfPossession.Sign(SECRET, MESSAGE), lambda: bls_sign(SECRET, MESSAGE)),
        "proof of possession": (lambda: G2ProofOfPossession._CoreSign(SECRET, bound, DST_POP_BOUND),
                                lambda: bls_bound_pop_prove(SECRET, OWNER, 1, KEYS_CONTRACT)),
        "verify": (lambda: G2ProofOfPossession.Verify(pk, MESSAGE, sig), lambda: bls_verify(pk, MESSAGE, sig)),
    }


def _timed(fn: Callable[[], object]) -> tuple[float, object]:
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def measure(trials: int) -> dict[str, dict[str, float]]:
    figures = {}
    for name, (theirs, ours) in cases().items():
        times: dict[str, list[float]] = {"reference": [], "veritrain": []}
        for trial in range(trials):
            order = [("reference", theirs), ("veritrain", ours)][:: 1 if trial % 2 == 0 else -1]
            outs = {}
            for label, fn in order:
                seconds, outs[label] = _timed(fn)
                times[label].append(seconds)
            if outs["reference"] != outs["veritrain"]:
                raise AssertionError(f"{name}: veritrain's answer differs from the reference's")
        ratios = [r / v for r, v in zip(times["reference"], times["veritrain"], strict=True)]
        figures[name] = {"reference_s": statistics.median(times["reference"]),
                         "veritrain_s": statistics.median(times["veritrain"]), "ratio": statistics.median(ratios)}
    return figures


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks bls", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="one trial per case (a smoke run)")
    parser.add_argument("--trials", type=int, default=7)
    parser.add_argument("--json", type=Path, default=Path("out/bench/bls.json"))
    args = parser.parse_args(argv)
    trials = 1 if args.quick else args.trials
    figures = measure(trials)
    table = Table(title=f"BLS12-381: reference (py-evm / py_ecc) vs veritrain, median of {trials}")
    for column in ("case", "reference s", "veritrain s", "ratio"):
        table.add_column(column, justify="left" if column == "case" else "right")
    for name, f in figures.items():
        table.add_row(name, f"{f['reference_s']:.3f}", f"{f['veritrain_s']:.3f}", f"{f['ratio']:.1f}x")
    Console().print(table)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"trials": trials, "figures": figures}, indent=2) + "\n")
    return 0
