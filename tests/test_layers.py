"""The layers of docs/ARCHITECTURE.md hold: import-linter's contracts (pyproject.toml) pass.

A broken layer fails CI here, with lint-imports' report naming the offending import."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_import_linter_contracts_are_kept() -> None:
    lint = Path(sys.executable).parent / "lint-imports"
    assert lint.is_file(), "import-linter is a dev dependency: pip install -e '.[dev]'"
    done = subprocess.run([str(lint), "--no-cache"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Contracts: 8 kept, 0 broken." in done.stdout


def test_mypy_finds_no_type_errors_in_the_packages() -> None:
    """mypy over protocol/, miner/ and validator/ (pyproject [tool.mypy]): a wrong type
    crossing a layer (a fraud kind as a bare string, say) fails here, not in a devnet."""
    done = subprocess.run([sys.executable, "-m", "mypy"], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
