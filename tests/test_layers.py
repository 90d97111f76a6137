"""The layers of docs/ARCHITECTURE.md hold: import-linter's contracts (pyproject.toml) pass.

A broken layer fails CI here, with lint-imports' report naming the offending import."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_import_linter_contracts_are_kept() -> None:
    lint = Path(sys.executable).parent / "lint-imports"
    assert lint.is_file(), "import-linter is a dev dependency: pip install -e '.[dev]'"
    done = subprocess.run([str(lint), "--no-cache"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Contracts: 10 kept, 0 broken." in done.stdout


def test_mypy_finds_no_type_errors_in_the_packages() -> None:
    """mypy over protocol/, miner/ and validator/ (pyproject [tool.mypy]): a wrong type
    crossing a layer (a fraud kind as a bare string, say) fails here, not in a devnet."""
    done = subprocess.run([sys.executable, "-m", "mypy"], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr


BREAKS = [  # (file, a forbidden import, the contract that must then fail)
    ("protocol/core/crypto/hashing.py", "import protocol.node.store", "core is pure"),
    ("protocol/config/corpus.py", "import web3", "only protocol.chain imports web3"),
    ("protocol/node/store.py", "import libp2p", "only protocol.p2p imports libp2p"),
    ("protocol/node/store.py", "import eth_utils", "keccak and addresses have one home"),
    ("protocol/cli/app.py", "import eth_account", "account keys have one home"),
    ("miner/node.py", "import protocol.devnet.cheats", "the roles never import the CLI or the devnet"),
    ("validator/node.py", "import miner.work", "miner and validator never import each other"),
    ("protocol/chain/client.py", "import protocol.cli.app", "layers:"),
    ("protocol/p2p/host.py", "import protocol.chain.client", "layers:"),
    ("protocol/core/settlement/result.py", "import torch", "no torch in the chain"),
    ("protocol/p2p/sources.py", "import protocol.core.checkpoint.format", "no torch in the chain"),  # indirectly
]


def test_each_contract_fails_when_its_rule_is_broken(tmp_path: Path) -> None:
    """The contracts are not vacuous: one forbidden import in a copy of the tree breaks the
    contract that names it (and lint-imports exits non-zero)."""
    import shutil

    lint = Path(sys.executable).parent / "lint-imports"
    for package in ("protocol", "miner", "validator"):
        shutil.copytree(REPO / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", tmp_path)
    for path, line, contract in BREAKS:
        target = tmp_path / path
        original = target.read_text()
        target.write_text(original + "\n" + line + "\n")
        done = subprocess.run([str(lint), "--no-cache"], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                              env={**os.environ, "PYTHONPATH": str(tmp_path)})
        target.write_text(original)
        broken = [row for row in done.stdout.splitlines() if row.endswith("BROKEN") or " BROKEN " in row]
        assert done.returncode != 0, f"{line} in {path} broke nothing"
        assert any(row.startswith(contract) for row in broken), (line, broken)
