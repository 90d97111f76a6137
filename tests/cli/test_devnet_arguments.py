"""`veritrain devnet` refuses validator counts that leave no honest validator in one error line,
before it writes anything or starts a node."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import run_cli


@pytest.mark.parametrize(("validators", "lazy", "silent"), [(2, 0, 2), (3, 1, 2), (4, 2, 3)])
def test_silent_validators_that_leave_no_honest_one_are_refused_before_anything_starts(
        tmp_path: Path, validators: int, lazy: int, silent: int) -> None:
    out = tmp_path / "devnet"
    result = run_cli("devnet", "--validators", str(validators), "--lazy-validators", str(lazy),
                     "--silent-validators", str(silent), "--out", str(out), timeout=60)
    assert result.code == 1, (result.code, result.stderr)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines == [f"error: --lazy-validators ({lazy}), --lying-validators (0) and --silent-validators ({silent}) "
                     f"must leave at least one honest validator of the {validators}"], result.stderr
    assert not out.exists()  # refused before the report folder, the chain or any node


def test_silent_validators_are_in_the_devnet_help() -> None:
    result = run_cli("devnet", "--help", timeout=60)
    assert result.code == 0 and "--silent-validators" in result.stdout


def test_an_unknown_preset_is_refused_with_the_list_before_anything_starts(tmp_path: Path) -> None:
    out = tmp_path / "devnet"
    result = run_cli("devnet", "--preset", "huge", "--out", str(out), timeout=60)
    assert result.code == 1, result.stderr
    assert result.stderr.strip().startswith("error: unknown model preset 'huge'; choose from gpt2, llama-124m"), \
        result.stderr
    assert not out.exists()
    assert "micro (fastest), tiny (default), small; all: gpt2, llama-124m" in run_cli("devnet", "--help").stdout
