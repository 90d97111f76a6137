"""Reading a corpus from disk into a `Dataset` (the pure paging and hashing is core.data).

Sources: the running Python's standard library (the default, offline everywhere), a folder
of text files (sorted by relative path), or a nanoGPT-style uint16 `.bin`.
"""

from __future__ import annotations

import os
import sys
import sysconfig
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from protocol.core.data import Dataset, DatasetError, from_bytes, from_tokens


def _read_sorted(root: Path, files: Sequence[Path]) -> bytes:
    ordered = sorted(files, key=lambda p: p.relative_to(root).as_posix())
    return b"".join(p.read_bytes() for p in ordered)


def from_folder(path: Path, pattern: str = "**/*", **kw: int) -> Dataset:
    """Every file under `path` matching `pattern`, sorted by relative path, as bytes."""
    files = [p for p in Path(path).glob(pattern) if p.is_file()]
    if not files:
        raise DatasetError(f"no files match {pattern!r} under {path}")
    return from_bytes(_read_sorted(Path(path), files), f"folder {path} ({len(files)} files)", **kw)


def stdlib_files() -> tuple[Path, list[Path]]:
    """The running Python's standard library .py files, without site/dist-packages."""
    root = Path(sysconfig.get_paths()["stdlib"])
    skip = {"site-packages", "dist-packages"}
    files: list[Path] = []
    # os.walk prunes site-packages instead of listing it whole (0.02 s rather than 0.9 s,
    # paid by every worker process); like rglob, it does not follow directory symlinks
    for folder, subdirs, names in os.walk(root):
        subdirs[:] = [d for d in subdirs if d not in skip]
        files += [Path(folder, n) for n in names if n.endswith(".py")]
    return root, files


def from_stdlib(**kw: int) -> Dataset:
    """The default corpus (docs/PROTOCOL.md): needs no download, changes with the Python version."""
    root, files = stdlib_files()
    version = ".".join(map(str, sys.version_info[:3]))
    return from_bytes(_read_sorted(root, files), f"Python {version} stdlib ({len(files)} files)", **kw)


def from_bin(path: Path, vocab_size: int = 256, **kw: int) -> Dataset:
    """A nanoGPT-style packed corpus: little-endian uint16 tokens."""
    raw = Path(path).read_bytes()
    if len(raw) % 2:
        raise DatasetError(f"{path}: a uint16 .bin must have an even byte length")
    return from_tokens(np.frombuffer(raw, dtype="<u2"), f"bin {path}", vocab_size=vocab_size, **kw)
