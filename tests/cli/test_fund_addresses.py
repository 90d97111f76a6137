"""`deploy --fund` and `fund` take an address in any valid form (lowercase, checksummed,
all caps) and refuse a bad one, or more tokens than the payer holds, in one `error:` line
(never a web3 traceback), before anything is sent."""

from __future__ import annotations

from pathlib import Path

import pytest
from eth_account import Account
from typer.testing import CliRunner

from protocol.cli.account import parse_address
from protocol.cli.app import app
from protocol.cli.usage import BadUsage

ADDRESS = Account.create().address  # checksummed, mixed case


def typo(address: str) -> str:
    """`address` with one letter's case flipped: mixed case that is not its checksum."""
    i = next(i for i, c in enumerate(address) if i > 1 and c.isalpha())
    return address[:i] + address[i].swapcase() + address[i + 1:]


def test_every_valid_form_is_the_checksummed_address() -> None:
    for form in (ADDRESS, ADDRESS.lower(), "0x" + ADDRESS[2:].upper()):
        assert parse_address(form) == ADDRESS
    with pytest.raises(BadUsage, match="not an address: '0x1234'"):
        parse_address("0x1234")
    with pytest.raises(BadUsage, match="fails its EIP-55 checksum"):
        parse_address(typo(ADDRESS))


def deploy_args(tmp_path: Path, *fund: str) -> list[str]:
    (tmp_path / "run.toml").write_text('[training]\npreset = "micro"\n[training.model]\nblock_size = 16\n')
    args = ["deploy", "--rpc", "embedded", "--dev-account", "--out", str(tmp_path / "dep.json"),
            "--config", str(tmp_path / "run.toml"), "--fund-eth", "0.5", "--fund-tokens", "7"]
    for address in fund:
        args += ["--fund", address]
    return args


def test_deploy_funds_a_lowercase_address(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, deploy_args(tmp_path, ADDRESS.lower()))
    assert result.exit_code == 0, result.output
    assert f"funding {ADDRESS}" in result.stderr and "Traceback" not in result.output


def test_deploy_refuses_a_bad_address_before_deploying(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, deploy_args(tmp_path, "0x1234"))
    assert result.exit_code == 2
    assert result.stderr.strip() == "error: not an address: '0x1234'"
    assert not (tmp_path / "dep.json").exists()


def test_deploy_refuses_more_tokens_than_the_deployer_holds(tmp_path: Path) -> None:
    args = deploy_args(tmp_path, ADDRESS)
    args[args.index("--fund-tokens") + 1] = str(10**12)  # more than the genesis supply
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1, result.output
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("error: the deployer 0x") and "needed to fund 1 account(s)" in last, last
    assert "fund with `veritrain fund`" in last and (tmp_path / "dep.json").exists()


def test_fund_refuses_a_bad_address_in_one_line(tmp_path: Path) -> None:
    bad = typo(ADDRESS)
    for given, said in (("0x1234", "not an address: '0x1234'"), (bad, f"address {bad} fails its EIP-55 checksum")):
        result = CliRunner().invoke(app, ["fund", ADDRESS.lower(), given, "--dev-account", "--rpc", "embedded",
                                          "--deployment", str(tmp_path / "none.json")])
        assert result.exit_code == 2 and result.stderr.strip().startswith(f"error: {said}"), result.output
