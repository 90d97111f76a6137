"""anvil, as the test fixture starts it, runs the EIP-2537 precompiles the bls module needs:
MODEXP, MAP_FP2_TO_G2, G2ADD and PAIRING (through BlsKeys.verify) and G1ADD (the harness)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from protocol.chain.backend import connect, dev_account
from protocol.chain.tx import TxSender
from protocol.core.crypto.bls import (
    bls_keygen,
    bls_public_key,
    bls_sign,
    g1_to_eip2537,
    g2_to_eip2537,
)
from tests.conftest import REPO

pytestmark = pytest.mark.anvil

ROOT = b"\x42" * 32


def compile_vyper(path: Path) -> dict:
    """abi and deploy bytecode of `path`, importing from the repository root (`contracts.bls`)."""
    from vyper.compiler import compile_from_file_input
    from vyper.compiler.input_bundle import FilesystemInputBundle

    bundle = FilesystemInputBundle([path.parent, REPO, *[Path(p) for p in sys.path if p]])
    return compile_from_file_input(bundle.load_file(path), input_bundle=bundle, output_formats=["abi", "bytecode"])


def deploy(handle, account, path: Path, *args):
    compiled = compile_vyper(path)
    factory = handle.w3.eth.contract(abi=compiled["abi"], bytecode=compiled["bytecode"])
    receipt = TxSender(handle.w3).send(factory.constructor(*args), account)
    return handle.w3.eth.contract(address=receipt["contractAddress"], abi=compiled["abi"])


def test_bls_verify_runs_on_anvil(anvil):
    handle = connect(anvil.url)
    account = dev_account(handle)
    # verify never calls staking: any nonzero address stands in for it
    keys = deploy(handle, account, REPO / "contracts" / "BlsKeys.vy", account.address)
    harness = deploy(handle, account, REPO / "tests" / "contracts" / "mocks" / "BlsHarness.vy")
    sk = bls_keygen(b"\x07" * 32)
    key = g1_to_eip2537(bls_public_key(sk))
    sig = g2_to_eip2537(bls_sign(sk, ROOT))
    assert keys.functions.verify(key, ROOT, sig).call()
    assert not keys.functions.verify(key, b"\x43" * 32, sig).call()
    assert not keys.functions.verify(key, ROOT, b"\x01" * 256).call()
    print(f"verify on anvil: {keys.functions.verify(key, ROOT, sig).estimate_gas()} gas (with the transaction's)")
    assert harness.functions.g1_add(key, harness.functions.g1_neg(key).call()).call() == bytes(128)
