"""`veritrain --version` prints the installed version; an operator's `miner --help` does not offer
the test-only `--cheat` (it still works for the tests that need an adversary)."""

from __future__ import annotations

from importlib.metadata import version

from tests.conftest import run_cli


def test_version_prints_the_installed_version() -> None:
    result = run_cli("--version", timeout=60)
    assert result.code == 0 and result.stdout.strip() == f"veritrain {version('veritrain')}", result.stdout


def test_the_test_only_cheat_is_not_in_the_miner_help() -> None:
    result = run_cli("miner", "--help", timeout=60)
    assert result.code == 0 and "--stake" in result.stdout and "--cheat" not in result.stdout, result.stdout


def test_flags_show_no_value_in_the_help() -> None:
    for command in ([], ["miner"], ["inspect"]):
        result = run_cli(*command, "--help", timeout=60)
        assert result.code == 0, result.stderr
        assert "<bool>" not in result.stdout, result.stdout
    assert "<path>" in run_cli("miner", "--help", timeout=60).stdout  # an option with a value keeps its type
