"""Every contract's deployed code stays under 60 % of the EIP-170 limit (24,576 bytes), with no
exceptions: a contract that outgrows its share moves a concept into a contract of its own (as the
tree challenges left the column challenges).

Sizes are read from the shipped artifacts, which tests/chain/test_artifacts.py checks against a
fresh compile."""

from __future__ import annotations

import pytest

from contracts.build import CONTRACT_NAMES, EIP170_LIMIT, load_all

SHARE = 0.60  # of EIP-170: leaves room to add functions to any contract


@pytest.fixture(scope="module")
def artifacts():
    return load_all()


@pytest.mark.parametrize("name", CONTRACT_NAMES)
def test_deployed_code_under_its_share_of_eip170(artifacts, name):
    # deployed code = runtime code + immutables, the size EIP-170 checks
    size = artifacts[name].deployed_size
    assert 0 < artifacts[name].runtime_size <= size <= SHARE * EIP170_LIMIT, (
        f"{name}: {size} bytes = {size / EIP170_LIMIT:.1%} of EIP-170")


def test_deployed_size_is_the_code_on_chain(artifacts):
    import boa

    art = artifacts["Scores"]  # constructor: one address argument
    address = boa.env.deploy_code(bytecode=bytes.fromhex(art.bytecode[2:]) + bytes(32))[0]
    assert len(boa.env.get_code(address)) == art.deployed_size == art.runtime_size + 32
