"""`veritrain fund` on anvil: gas and tokens to an account added after deploy, and refused where
the dev account's key would mean nothing (a chain that is not a dev chain)."""

from __future__ import annotations

import subprocess
import time

import pytest
from eth_account import Account

from protocol.chain.backend import connect, dev_account
from protocol.chain.client import ChainClient
from protocol.chain.deploy import deploy
from protocol.chain.deployment import save_deployment
from protocol.config.run_config import RunConfig
from protocol.core.errors import ChainError
from tests.conftest import anvil_binary, free_port, run_cli, stop_process

pytestmark = pytest.mark.anvil


def test_fund_sends_gas_and_exact_tokens(anvil, tmp_path):
    handle = connect(anvil.url)
    dep = deploy(handle, dev_account(handle), RunConfig())
    path = tmp_path / "deployment.json"
    save_deployment(dep, path)
    fresh = [Account.create().address for _ in range(2)]
    # any valid form: the second in lowercase (web3 alone would refuse it with a traceback)
    result = run_cli("fund", fresh[0], fresh[1].lower(), "--dev-account", "--eth", "0.25", "--tokens", "7", "--rpc", anvil.url,
                     "--deployment", str(path), timeout=120)
    assert result.code == 0, result.stderr
    assert f"funded {fresh[0]}: 0.25 ETH, 7 tokens" in result.stdout
    assert f"funded {fresh[1]}: 0.25 ETH, 7 tokens" in result.stdout
    reader = ChainClient(connect(anvil.url), dep)
    for address in fresh:
        assert int(reader.w3.eth.get_balance(address)) == 25 * 10**16
        assert reader.token_balance(address) == 7 * 10**18

    without = run_cli("fund", fresh[0], "--rpc", anvil.url, "--deployment", str(path), timeout=60)
    assert without.code == 2 and without.stderr.strip().startswith("error: give --dev-account")
    bad = run_cli("fund", "0x1234", "--dev-account", "--rpc", anvil.url, "--deployment", str(path), timeout=60)
    assert bad.code == 2 and bad.stderr.strip() == "error: not an address: '0x1234'"


def test_fund_refuses_an_address_it_cannot_reach_before_sending_anything(anvil, tmp_path):
    handle = connect(anvil.url)
    dep = deploy(handle, dev_account(handle), RunConfig())
    path = tmp_path / "deployment.json"
    save_deployment(dep, path)
    fresh = Account.create().address
    payer_nonce = handle.w3.eth.get_transaction_count(dev_account(handle).address)
    for target, why in (("0x" + "00" * 20, "the token refuses transfers to the zero address"),
                        (dep.contracts.token, "it is a contract, which refuses plain ETH")):
        result = run_cli("fund", fresh, target, "--dev-account", "--rpc", anvil.url, "--deployment", str(path),
                         timeout=60)
        assert result.code == 1 and result.stderr.count("error:") == 1, result.stderr
        assert why in result.stderr and "keys show" in result.stderr, result.stderr
    # neither the good address before it nor the bad one got anything
    assert handle.w3.eth.get_transaction_count(dev_account(handle).address) == payer_nonce
    assert int(handle.w3.eth.get_balance(fresh)) == 0


def test_fund_refuses_a_chain_that_is_not_a_dev_chain(tmp_path):
    binary = anvil_binary()
    if binary is None:
        pytest.skip("anvil not found")
    port = free_port()
    proc = subprocess.Popen([binary, "--host", "127.0.0.1", "--port", str(port), "--silent", "--chain-id", "5"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}"
        for _ in range(300):  # until it answers
            try:
                handle = connect(url)
                break
            except ChainError:
                time.sleep(0.1)
        else:
            pytest.fail("anvil --chain-id 5 did not start")
        dep = deploy(handle, dev_account(handle), RunConfig())
        path = tmp_path / "deployment.json"
        save_deployment(dep, path)
        result = run_cli("fund", Account.create().address, "--dev-account", "--rpc", url, "--deployment", str(path),
                         timeout=60)
        assert result.code == 1
        assert result.stderr.strip().startswith("error: chain 5 is not a dev chain"), result.stderr
    finally:
        stop_process(proc)
