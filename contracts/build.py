"""Compile the Vyper sources in this folder, with an on-disk cache keyed by source hash.

This module uses only the `vyper` package; deploying is `protocol.chain.deploy`'s job
(the only web3 importer). snekmate is found on `sys.path`, which is where pip puts it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

CONTRACTS_DIR = Path(__file__).resolve().parent
# deploy order: each contract's constructor names only contracts before it
CONTRACT_NAMES = ("Token", "Staking", "BlsKeys", "Rounds", "Scores", "Rewards", "Results", "ColumnChallenges", "AccountChallenges", "Disputes")
EIP170_LIMIT = 24_576  # bytes of runtime code a contract may have (EIP-170)


@dataclass(frozen=True)
class CompiledContract:
    name: str
    abi: list[dict]
    bytecode: str  # 0x-prefixed deploy bytecode
    source_hash: str
    bytecode_runtime: str = "0x"  # 0x-prefixed runtime code, without the immutables
    immutables_size: int = 0  # bytes of immutable values appended to the runtime code at deploy

    @property
    def runtime_size(self) -> int:
        """Bytes of runtime code, as the compiler emits it."""
        return (len(self.bytecode_runtime) - 2) // 2

    @property
    def deployed_size(self) -> int:
        """Bytes of code on chain (runtime code plus immutables): what EIP-170 limits."""
        return self.runtime_size + self.immutables_size


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


# artifacts already read in this process, by (cache folder, sources hash, name)
_LOADED: dict[tuple[str, str, str], CompiledContract] = {}


def compile_contract(name: str, key: str | None = None) -> CompiledContract:
    """Contract `name` (e.g. "Rounds"): the cached artifact if the sources are unchanged,
    else compiled once (under a lock, so concurrent first starts compile it once) and cached.

    A warm cache never imports the compiler's `compile_from_file_input`: nodes load ABIs
    from the artifacts built at install or first use. `key` is `sources_hash()`, when the
    caller has it already."""
    if name not in CONTRACT_NAMES:
        raise ValueError(f"unknown contract {name!r}; expected one of {CONTRACT_NAMES}")
    key = key or sources_hash()
    memo = (str(cache_dir()), key, name)
    if memo in _LOADED:
        return _LOADED[memo]
    cached = cache_dir() / f"{name}-{key[:16]}.json"
    artifact = _read_artifact(cached, name, key)
    if artifact is None:
        with _build_lock():
            artifact = _read_artifact(cached, name, key)  # another process may have built it meanwhile
            if artifact is None:
                compiled = _compile_uncached(name)
                code_layout = compiled["layout"].get("code_layout", {})
                data = {k: compiled[k] for k in ("abi", "bytecode", "bytecode_runtime")}
                data["immutables_size"] = _immutables_end(code_layout)
                _atomic_write(cached, json.dumps(data))
                artifact = CompiledContract(name, data["abi"], data["bytecode"], key, data["bytecode_runtime"],
                                            data["immutables_size"])
    _LOADED[memo] = artifact
    return artifact


def compile_all() -> dict[str, CompiledContract]:
    """Every deployable contract, by name (one sources hash for all of them)."""
    key = sources_hash()
    return {name: compile_contract(name, key) for name in CONTRACT_NAMES}


def _immutables_end(layout: dict) -> int:
    """End of the immutables section from a `code_layout` (nested per imported module)."""
    if "offset" in layout and "length" in layout:
        return int(layout["offset"]) + int(layout["length"])
    return max((_immutables_end(v) for v in layout.values() if isinstance(v, dict)), default=0)


def _read_artifact(path: Path, name: str, key: str) -> CompiledContract | None:
    try:
        data = json.loads(path.read_text())
        return CompiledContract(name, data["abi"], data["bytecode"], key, data["bytecode_runtime"],
                                data["immutables_size"])
    except FileNotFoundError:
        return None
    except (ValueError, KeyError):
        return None  # unreadable or from an older layout: rebuild it


@contextlib.contextmanager
def _build_lock() -> Iterator[None]:
    """An exclusive lock on the cache folder while a missing artifact is compiled."""
    folder = cache_dir()
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".build.lock", "a") as handle:
        try:
            import fcntl
        except ImportError:  # not POSIX: the atomic rename alone keeps the cache consistent
            yield
            return
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _compile_uncached(name: str) -> dict:
    from vyper.compiler import compile_from_file_input
    from vyper.compiler.input_bundle import FilesystemInputBundle

    bundle = FilesystemInputBundle([CONTRACTS_DIR, *[Path(p) for p in sys.path if p]])
    file_input = bundle.load_file(CONTRACTS_DIR / f"{name}.vy")
    return compile_from_file_input(file_input, input_bundle=bundle, output_formats=["abi", "bytecode", "bytecode_runtime", "layout"])


def _atomic_write(path: Path, text: str) -> None:
    # write-then-rename so a crash never leaves a half-written artifact in the cache
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
    os.replace(tmp, path)
