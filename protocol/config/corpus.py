"""Reading a corpus from disk into a `Dataset` (the pure paging and hashing is core.data).

Sources: the running Python's standard library (the default, offline everywhere), a folder
of text files (sorted by relative path), a nanoGPT-style uint16 `.bin`, or a corpus packed by
`veritrain data pack` (`protocol.config.tokenize_pack`): `corpus.bin` of little-endian tokens
with its sidecar `corpus.bin.json` (`PackedMeta`).
"""

from __future__ import annotations

import os
import sys
import sysconfig
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from protocol.core.crypto.hashing import content_hasher
from protocol.core.errors import ConfigError
from protocol.core.train.data import (
    Dataset,
    DatasetError,
    from_bytes,
    from_tokens,
    token_dtype,
    token_width,
)

PACKED_FORMAT_VERSION: Literal[1] = 1  # bumped when the .bin or sidecar changes meaning
_HEX64 = r"^[0-9a-f]{64}$"
_HASH_CHUNK = 1 << 24  # tokens file hashed in 16 MiB slices of its mapping


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


class PackedCorpusError(DatasetError):
    """Raised when a packed corpus's .bin or sidecar .json is missing, malformed, or the two
    disagree (length, width, content hash)."""


class CorpusTooSmall(DatasetError):
    """Raised when a corpus has fewer tokens than a run can page (`min_corpus_tokens`): fewer
    than `heldout_every` pages leave no page held out for validators' scoring."""


def min_corpus_tokens(page_tokens: int, heldout_every: int) -> int:
    """The fewest tokens a run trains on: `heldout_every` whole pages, the fewest of which one
    is held out (page i is held out when i % heldout_every == heldout_every - 1; `from_tokens`
    refuses fewer pages). At the defaults, 20 pages of 4096 tokens: 81,920 tokens."""
    return page_tokens * heldout_every


def check_corpus_size(tokens: int, page_tokens: int, heldout_every: int, where: str) -> None:
    """Refuse (`CorpusTooSmall`, one line saying the minimum and why) a corpus of `tokens`
    tokens that a run cannot page with this layout (`where` names the inputs; the caller
    writes nothing after a refusal)."""
    need = min_corpus_tokens(page_tokens, heldout_every)
    if tokens < need:
        raise CorpusTooSmall(
            f"{where} make {tokens:,} tokens, {tokens // page_tokens:,} pages of {page_tokens:,}: too few for a run, "
            f"which needs at least {heldout_every} pages ({need:,} tokens) since 1 page in {heldout_every} is held "
            f"out for validators' scoring (--heldout-every) and fewer pages hold none; add text (nothing was written)")


class PackedCorpusMismatch(ConfigError):
    """Raised when a packed corpus was made with another tokenizer or vocabulary than the
    run config's `[training.dataset]` names."""


class PackedMeta(BaseModel):
    """The sidecar `corpus.bin.json`: what the raw token file is and how it was made."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    format_version: Literal[1]  # PACKED_FORMAT_VERSION
    token_width: Literal[2, 4]  # bytes per little-endian token; follows vocab_size
    vocab_size: int = Field(gt=0)  # the tokenizer's, special tokens included
    tokenizer_hash: str = Field(pattern=_HEX64)  # plain blake3 of tokenizer.json's bytes (b3sum)
    tokens: int = Field(ge=0)  # tokens in the .bin
    content_hash: str = Field(pattern=_HEX64)  # plain blake3 of the .bin's bytes
    source_files: int = Field(ge=0)  # input files read
    documents: int = Field(ge=0)  # documents tokenized (a text file, a JSONL line, a Parquet row)
    eos_token_id: int = Field(ge=0)  # ends every document in the stream

    @model_validator(mode="after")
    def _consistent(self) -> PackedMeta:
        if self.token_width != token_width(self.vocab_size):
            raise ValueError(f"token_width {self.token_width} does not fit vocab_size {self.vocab_size}")
        if self.eos_token_id >= self.vocab_size:
            raise ValueError(f"eos_token_id {self.eos_token_id} >= vocab_size {self.vocab_size}")
        return self


def sidecar_path(path: Path) -> Path:
    return Path(f"{path}.json")


def read_packed_meta(path: Path) -> PackedMeta:
    """The sidecar of the packed corpus at `path` (the .bin), validated."""
    side = sidecar_path(path)
    try:
        raw = side.read_bytes()
    except OSError as exc:
        raise PackedCorpusError(f"{path}: cannot read its sidecar {side} ({exc.strerror})") from exc
    try:
        return PackedMeta.model_validate_json(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(map(str, first["loc"])) or "sidecar"
        raise PackedCorpusError(f"{side}: {where}: {first['msg']}") from exc


def check_packed_meta(meta: PackedMeta, path: Path, tokenizer_hash: str | None, vocab_size: int | None) -> None:
    """Refuse a corpus packed with another tokenizer or vocabulary than the run config pins."""
    if tokenizer_hash is not None and tokenizer_hash != meta.tokenizer_hash:
        raise PackedCorpusMismatch(
            f"[training.dataset] tokenizer_hash {tokenizer_hash[:16]}… differs from {path}'s "
            f"{meta.tokenizer_hash[:16]}…: the corpus was packed with another tokenizer")
    if vocab_size is not None and vocab_size != meta.vocab_size:
        raise PackedCorpusMismatch(
            f"[training.dataset] vocab_size {vocab_size} differs from {path}'s {meta.vocab_size}")


def packed_tokens(path: Path, meta: PackedMeta) -> np.ndarray:
    """The .bin's tokens, mapped read-only (worker processes share the page cache), after
    checking its length and content hash against the sidecar."""
    try:
        size = Path(path).stat().st_size
    except OSError as exc:
        raise PackedCorpusError(f"{path}: cannot read the packed tokens ({exc.strerror})") from exc
    if size != meta.tokens * meta.token_width:
        raise PackedCorpusError(f"{path}: {size} bytes, but its sidecar says {meta.tokens} tokens of "
                                f"{meta.token_width} bytes ({meta.tokens * meta.token_width})")
    if size == 0:
        raise PackedCorpusError(f"{path}: holds no tokens")
    tokens = np.memmap(path, dtype=token_dtype(meta.token_width), mode="r")
    hasher = content_hasher()
    flat = tokens.view(np.uint8)
    for start in range(0, size, _HASH_CHUNK):
        hasher.update(flat[start : start + _HASH_CHUNK].data)  # a view of the mapping: no copy
    if hasher.hexdigest() != meta.content_hash:
        raise PackedCorpusError(f"{path}: content differs from its sidecar's content_hash "
                                f"(rewritten or torn since packing; pack it again)")
    return tokens


def from_packed(path: Path, tokenizer_hash: str | None = None, vocab_size: int | None = None,
                **kw: int) -> Dataset:
    """A corpus packed by `veritrain data pack`; `tokenizer_hash` and `vocab_size`, when
    given, must be the sidecar's (`PackedCorpusMismatch` otherwise)."""
    meta = read_packed_meta(path)
    check_packed_meta(meta, path, tokenizer_hash, vocab_size)
    source = f"packed {path} ({meta.tokens} tokens, tokenizer {meta.tokenizer_hash[:16]}…)"
    return from_tokens(packed_tokens(path, meta), source, vocab_size=meta.vocab_size, **kw)
