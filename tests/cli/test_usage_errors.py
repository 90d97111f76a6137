"""Usage errors, click's own included, are one `error:` line on stderr with exit code 2."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import REPO, run_cli


def one_error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr
    return lines[0]


@pytest.mark.parametrize(("args", "needle"), [
    (("unbond", "-5"), "amounts must be positive, got -5"),
    (("nosuch",), "No such command 'nosuch'"),
    (("deploy", "--rpc", "x"), "Missing option '--out'"),
    (("devnet", "--miners", "0"), "Invalid value for '--miners'"),
    (("hardware", "--bogus"), "No such option: --bogus"),
    (("stake", "1.0000000000000000001", "--rpc", "x", "--deployment", "y", "--keys", "z"), "more than 18 decimals"),
    (("stake", "abc", "--rpc", "x", "--deployment", "y", "--keys", "z"), "not a token amount: 'abc'"),
])
def test_usage_errors_are_one_line_exit_2(args: tuple[str, ...], needle: str) -> None:
    result = run_cli(*args, timeout=60)
    assert result.code == 2, (result.code, result.stderr)
    assert needle in one_error_line(result.stderr)


def test_python_dash_m_protocol_cli_uses_the_same_entry_point() -> None:
    proc = subprocess.run([sys.executable, "-m", "protocol.cli", "nosuch"], capture_output=True, text=True, cwd=REPO,
                          timeout=60, stdin=subprocess.DEVNULL)
    assert proc.returncode == 2
    assert "No such command 'nosuch'" in one_error_line(proc.stderr)


def test_no_arguments_print_the_help() -> None:
    result = run_cli(timeout=60)
    assert result.code == 0 and "Usage:" in result.stdout and "error" not in result.stderr


def test_the_console_script_is_the_one_line_entry_point() -> None:
    import tomllib

    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["veritrain"] == "protocol.cli.usage:main"
