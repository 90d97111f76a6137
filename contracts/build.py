"""Contract artifacts: compiled once by `python -m contracts.build`, shipped as package data.

`contracts/artifacts/<Name>.json` holds each deployable contract's ABI, deploy bytecode,
runtime code and immutables size; `contracts/artifacts/manifest.json` the hashes they were
built from. Nodes and the devnet load these files (`load_all`) and never run the compiler;
`tests/chain/test_artifacts.py` checks that a fresh compile gives exactly what is shipped, so
a contract edited without rebuilding fails CI. This module imports `vyper` only to compile;
deploying is `protocol.chain.deploy`'s job (the only web3 importer). snekmate is found on
`sys.path`, which is where pip puts it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from protocol.core.errors import ConfigError

CONTRACTS_DIR = Path(__file__).resolve().parent
ARTIFACTS_DIR = CONTRACTS_DIR / "artifacts"
MANIFEST = "manifest.json"
# deploy order: each contract's constructor names only contracts before it
CONTRACT_NAMES = ("Token", "Staking", "BlsKeys", "Rounds", "Scores", "Rewards", "Results", "ColumnChallenges", "TreeChallenges",
                  "AccountChallenges", "ClaimsChallenges", "Disputes")
EIP170_LIMIT = 24_576  # bytes of runtime code a contract may have (EIP-170)


@dataclass(frozen=True)
class CompiledContract:
    name: str
    abi: list[dict]
    bytecode: str  # 0x-prefixed deploy bytecode
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

    def to_json(self) -> dict:
        return {"abi": self.abi, "bytecode": self.bytecode, "bytecode_runtime": self.bytecode_runtime,
                "immutables_size": self.immutables_size}


class ArtifactsMissing(ConfigError):
    """Raised when a shipped artifact is missing or unreadable: run `python -m contracts.build`."""


def contracts_hash(folder: Path = CONTRACTS_DIR) -> str:
    """Hash of our own contract, module and interface sources: what a rebuild must follow."""
    digest = hashlib.sha256()
    for path in sorted([*folder.glob("*.vy"), *folder.glob("interfaces/*.vyi")]):
        digest.update(path.relative_to(folder).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def sources_hash() -> str:
    """Hash of every contract, module and interface source plus the compiler and snekmate sources."""
    import snekmate

    digest = hashlib.sha256()
    digest.update(f"vyper={metadata.version('vyper')}".encode())
    snekmate_dir = Path(list(snekmate.__path__)[0]).resolve()
    ours = [*CONTRACTS_DIR.glob("*.vy"), *CONTRACTS_DIR.glob("interfaces/*.vyi")]
    theirs = [*snekmate_dir.rglob("*.vy"), *snekmate_dir.rglob("*.vyi")]
    for path in sorted(ours) + sorted(theirs):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


# ---- loading what is shipped (nodes, devnet) -----------------------------------------
_LOADED: dict[tuple[str, str], CompiledContract] = {}


def load_artifact(name: str, folder: Path = ARTIFACTS_DIR) -> CompiledContract:
    """The shipped artifact of contract `name` (e.g. "Rounds"), read once per process."""
    if name not in CONTRACT_NAMES:
        raise ValueError(f"unknown contract {name!r}; expected one of {CONTRACT_NAMES}")
    memo = (str(folder), name)
    if memo not in _LOADED:
        data = _read_json(folder / f"{name}.json")
        try:
            _LOADED[memo] = CompiledContract(name, data["abi"], data["bytecode"], data["bytecode_runtime"],
                                             int(data["immutables_size"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise ArtifactsMissing(f"{folder / name}.json is not a contract artifact; run python -m contracts.build") from exc
    return _LOADED[memo]


def load_all(folder: Path = ARTIFACTS_DIR) -> dict[str, CompiledContract]:
    """Every deployable contract's shipped artifact, by name."""
    return {name: load_artifact(name, folder) for name in CONTRACT_NAMES}


def manifest(folder: Path = ARTIFACTS_DIR) -> dict[str, str]:
    """What the shipped artifacts were built from: `sources_hash`, `contracts_hash`, `vyper`."""
    return {str(k): str(v) for k, v in _read_json(folder / MANIFEST).items()}


def stale(folder: Path = ARTIFACTS_DIR) -> bool:
    """Whether our contract sources changed since the shipped artifacts were built."""
    return manifest(folder).get("contracts_hash") != contracts_hash()


def _read_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError as exc:
        raise ArtifactsMissing(f"{path} is missing; run python -m contracts.build") from exc
    except ValueError as exc:
        raise ArtifactsMissing(f"{path} is not valid JSON; run python -m contracts.build") from exc
    if not isinstance(data, dict):
        raise ArtifactsMissing(f"{path} is not a contract artifact; run python -m contracts.build")
    return data


# ---- compiling (the build command, its CI check) --------------------------------------
def compile_contract(name: str) -> CompiledContract:
    """Compile contract `name` from the sources in this folder (seconds: use `load_artifact` to deploy)."""
    if name not in CONTRACT_NAMES:
        raise ValueError(f"unknown contract {name!r}; expected one of {CONTRACT_NAMES}")
    from vyper.compiler import compile_from_file_input
    from vyper.compiler.input_bundle import FilesystemInputBundle

    bundle = FilesystemInputBundle([CONTRACTS_DIR, *[Path(p) for p in sys.path if p]])
    file_input = bundle.load_file(CONTRACTS_DIR / f"{name}.vy")
    out = compile_from_file_input(file_input, input_bundle=bundle,
                                  output_formats=["abi", "bytecode", "bytecode_runtime", "layout"])
    immutables = _immutables_end(out["layout"].get("code_layout", {}))
    return CompiledContract(name, out["abi"], out["bytecode"], out["bytecode_runtime"], immutables)


def compile_all() -> dict[str, CompiledContract]:
    """Every deployable contract, freshly compiled, by name."""
    return {name: compile_contract(name) for name in CONTRACT_NAMES}


def artifact_files(compiled: dict[str, CompiledContract]) -> dict[str, str]:
    """The text of every shipped file, by file name, for these compiled contracts."""
    files = {f"{name}.json": _dump(art.to_json()) for name, art in compiled.items()}
    files[MANIFEST] = _dump({"sources_hash": sources_hash(), "contracts_hash": contracts_hash(),
                             "vyper": metadata.version("vyper"), "snekmate": metadata.version("snekmate")})
    return files


def write_artifacts(folder: Path = ARTIFACTS_DIR) -> list[str]:
    """Compile every contract and write its artifact and the manifest; returns the files written."""
    files = artifact_files(compile_all())
    folder.mkdir(parents=True, exist_ok=True)
    for file_name, text in files.items():
        (folder / file_name).write_text(text)
    _LOADED.clear()
    return sorted(files)


def _dump(data: dict) -> str:
    # one key per line and a trailing newline: diffs of a rebuild stay readable
    return json.dumps(data, indent=1, sort_keys=True) + "\n"


def _immutables_end(layout: dict) -> int:
    """End of the immutables section from a `code_layout` (nested per imported module)."""
    if "offset" in layout and "length" in layout:
        return int(layout["offset"]) + int(layout["length"])
    return max((_immutables_end(v) for v in layout.values() if isinstance(v, dict)), default=0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m contracts.build", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare a fresh compile with the shipped files; write nothing")
    args = parser.parse_args(argv)
    if args.check:
        files = artifact_files(compile_all())
        differ = [f for f, text in files.items() if not (ARTIFACTS_DIR / f).is_file() or (ARTIFACTS_DIR / f).read_text() != text]
        for file_name in differ:
            print(f"stale: contracts/artifacts/{file_name}", file=sys.stderr)
        return 1 if differ else 0
    for file_name in write_artifacts():
        print(f"wrote contracts/artifacts/{file_name}")
    for name, art in load_all().items():
        print(f"{name}: {art.deployed_size} bytes = {art.deployed_size / EIP170_LIMIT:.1%} of EIP-170")
    return 0


if __name__ == "__main__":
    sys.exit(main())
