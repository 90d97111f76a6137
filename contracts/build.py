"""Compile the Vyper sources in this folder, with an on-disk cache keyed by source hash.

This module uses only the `vyper` package; deploying is `protocol.chain.deploy`'s job
(the only web3 importer). snekmate is found on `sys.path`, which is where pip puts it.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

CONTRACTS_DIR = Path(__file__).resolve().parent
# deploy order: each contract's constructor names only contracts before it
CONTRACT_NAMES = ("Token", "Staking", "Rounds", "Scores", "Rewards", "Attestation", "Disputes")
EIP170_LIMIT = 24_576  # bytes of runtime code a contract may have (EIP-170)


@dataclass(frozen=True)
class CompiledContract:
    name: str
    abi: list[dict]
    bytecode: str  # 0x-prefixed deploy bytecode
    source_hash: str
    bytecode_runtime: str = "0x"  # 0x-prefixed runtime code (what EIP-170 limits)

    @property
    def runtime_size(self) -> int:
        """Bytes of runtime code."""
        return (len(self.bytecode_runtime) - 2) // 2


def cache_dir() -> Path:
    """Where compiled artifacts live; VERITRAIN_CACHE overrides the default."""
    root = os.environ.get("VERITRAIN_CACHE") or os.path.join(Path.home(), ".cache", "veritrain")
    return Path(root) / "contracts"


def sources_hash() -> str:
    """Hash of every contract, module and interface source plus the compiler and snekmate sources."""
    import snekmate
    import vyper

    digest = hashlib.sha256()
    digest.update(f"vyper={vyper.__version__}".encode())
    snekmate_dir = Path(list(snekmate.__path__)[0]).resolve()
    ours = [*CONTRACTS_DIR.glob("*.vy"), *CONTRACTS_DIR.glob("interfaces/*.vyi")]
    theirs = [*snekmate_dir.rglob("*.vy"), *snekmate_dir.rglob("*.vyi")]
    for path in sorted(ours) + sorted(theirs):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def compile_contract(name: str) -> CompiledContract:
    """Compile `name` (e.g. "Settlement"), reusing the cached artifact if sources are unchanged."""
    if name not in CONTRACT_NAMES:
        raise ValueError(f"unknown contract {name!r}; expected one of {CONTRACT_NAMES}")
    key = sources_hash()
    cached = cache_dir() / f"{name}-{key[:16]}.json"
    if cached.exists():
        try:
            data = json.loads(cached.read_text())
            return CompiledContract(name, data["abi"], data["bytecode"], key, data["bytecode_runtime"])
        except (ValueError, KeyError):
            pass  # unreadable or from an older layout: rebuild it
    compiled = _compile_uncached(name)
    data = {k: compiled[k] for k in ("abi", "bytecode", "bytecode_runtime")}
    _atomic_write(cached, json.dumps(data))
    return CompiledContract(name, data["abi"], data["bytecode"], key, data["bytecode_runtime"])


def compile_all() -> dict[str, CompiledContract]:
    return {name: compile_contract(name) for name in CONTRACT_NAMES}


def _compile_uncached(name: str) -> dict:
    from vyper.compiler import compile_from_file_input
    from vyper.compiler.input_bundle import FilesystemInputBundle

    bundle = FilesystemInputBundle([CONTRACTS_DIR, *[Path(p) for p in sys.path if p]])
    file_input = bundle.load_file(CONTRACTS_DIR / f"{name}.vy")
    return compile_from_file_input(file_input, input_bundle=bundle, output_formats=["abi", "bytecode", "bytecode_runtime"])


def _atomic_write(path: Path, text: str) -> None:
    # write-then-rename so a crash never leaves a half-written artifact in the cache
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
    os.replace(tmp, path)
