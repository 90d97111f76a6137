"""Every contract deploys under the EIP-170 runtime-code limit (24,576 bytes).

ColumnChallenges is the largest (about 60 %: issue 14 left little headroom there)."""

from __future__ import annotations

import pytest

from contracts.build import CONTRACT_NAMES, EIP170_LIMIT, compile_all


@pytest.fixture(scope="module")
def artifacts():
    return compile_all()


@pytest.mark.parametrize("name", CONTRACT_NAMES)
def test_deployed_code_under_eip170(artifacts, name):
    # deployed code = runtime code + immutables, the size EIP-170 checks
    size = artifacts[name].deployed_size
    assert 0 < artifacts[name].runtime_size <= size < EIP170_LIMIT, (
        f"{name}: {size} bytes = {size / EIP170_LIMIT:.1%} of EIP-170")


def test_deployed_size_is_the_code_on_chain(artifacts):
    import boa

    art = artifacts["Scores"]  # constructor: one address argument
    address = boa.env.deploy_code(bytecode=bytes.fromhex(art.bytecode[2:]) + bytes(32))[0]
    assert len(boa.env.get_code(address)) == art.deployed_size == art.runtime_size + 32
