"""Every contract stays well under the EIP-170 runtime-code limit (60 % of 24,576 bytes)."""

from __future__ import annotations

import pytest

from contracts.build import CONTRACT_NAMES, EIP170_LIMIT, compile_all

MAX_SHARE = 0.60  # headroom for fixes without another split


@pytest.fixture(scope="module")
def artifacts():
    return compile_all()


@pytest.mark.parametrize("name", CONTRACT_NAMES)
def test_runtime_code_under_60_percent_of_eip170(artifacts, name):
    # deployed code = runtime code + immutables, the size EIP-170 checks
    size = artifacts[name].deployed_size
    assert 0 < artifacts[name].runtime_size <= size < MAX_SHARE * EIP170_LIMIT, (
        f"{name}: {size} bytes = {size / EIP170_LIMIT:.1%} of EIP-170")


def test_deployed_size_is_the_code_on_chain(artifacts):
    import boa

    art = artifacts["Attestation"]  # constructor: one address argument
    address = boa.env.deploy_code(bytecode=bytes.fromhex(art.bytecode[2:]) + bytes(32))[0]
    assert len(boa.env.get_code(address)) == art.deployed_size == art.runtime_size + 32
