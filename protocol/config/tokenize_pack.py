"""Text, JSONL or Parquet files -> a packed token corpus (`corpus.bin` + `corpus.bin.json`).

Documents come in a fixed order, so two packs of the same inputs give the same bytes: files
sorted by relative path (hidden files and folders skipped); a text file is one document, each
JSONL line's "text" field one, each Parquet row's "text" column one. A document is tokenized
without the tokenizer's own special tokens, and the end-of-document token follows it, so
documents never run into each other. Text that spells a special token is tokenized as plain
text (`encode_special_tokens`): a document cannot forge a document boundary.

`train_tokenizer` trains a byte-level BPE (GPT-2 style) on the same documents, offline.
The reading side is `protocol.config.corpus.from_packed`.
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from protocol.config.atomic import atomic_stream, atomic_write
from protocol.config.corpus import (
    PACKED_FORMAT_VERSION,
    PackedMeta,
    check_corpus_size,
    sidecar_path,
)
from protocol.core.crypto.hashing import content_hash, content_hasher
from protocol.core.errors import ConfigError
from protocol.core.train.data import MAX_VOCAB, DatasetError, token_dtype, token_width

TRAINED_EOS = "<|endoftext|>"  # the end-of-document token of a tokenizer trained here (id 0)
# looked up, in order, in a given tokenizer that names no --eos-token (GPT-2, Llama 2, Llama 3, Gemma)
EOS_CANDIDATES = (TRAINED_EOS, "</s>", "<|end_of_text|>", "<eos>")
MIN_TRAINED_VOCAB = 257  # 256 byte tokens + the end-of-document token
BATCH_CHARS = 4 << 20  # characters per encode_batch call: bounds memory, keeps the Rust threads busy
BATCH_DOCS = 4096  # documents per encode_batch call, for corpora of many short documents
PARQUET_ROWS = 1024  # rows read from a Parquet file at a time
FILE_MODE = 0o644  # outputs are public data, readable by every node process (mkstemp would give 0600)


class CorpusInputError(DatasetError):
    """Raised when an input file cannot be read as documents: missing, not UTF-8, a bad JSONL
    line or one without a "text" string (named file:line), a Parquet file without a "text"
    string column, or no documents at all."""


class TokenizerError(ConfigError):
    """Raised when a tokenizer.json cannot be read or parsed, has no end-of-document token,
    or cannot be trained (vocab out of range, or the file exists and would be overwritten)."""


@dataclass(frozen=True)
class PackProgress:
    files_read: int  # input files fully read so far
    files_total: int
    documents: int  # documents tokenized so far
    tokens: int  # tokens written so far, end-of-document tokens included


@dataclass(frozen=True)
class LoadedTokenizer:
    tokenizer: Any  # tokenizers.Tokenizer, with encode_special_tokens on
    hash: str  # plain blake3 hex of the tokenizer.json bytes (what `b3sum` prints)
    vocab_size: int  # special tokens included
    eos_id: int


# ---------------------------------------------------------------------------------------
# inputs


def input_files(path: Path, exclude: Collection[Path] = ()) -> list[Path]:
    """The files to read: `path` itself, or every non-hidden file under it, by relative path.
    `exclude` (the output and tokenizer files) is left out, so a re-pack never reads them."""
    path = Path(path)
    if path.is_file():
        files = [path]
    elif path.is_dir():
        files = []
        for folder, subdirs, names in os.walk(path):  # like rglob, does not follow folder symlinks
            subdirs[:] = [d for d in subdirs if not d.startswith(".")]
            files += [Path(folder, n) for n in names if not n.startswith(".")]
        files.sort(key=lambda p: p.relative_to(path).as_posix())
    else:
        raise CorpusInputError(f"{path}: no such file or folder")
    skip = {Path(p).resolve() for p in exclude}
    files = [f for f in files if f.resolve() not in skip]
    if not files:
        raise CorpusInputError(f"{path}: no input files")
    return files


def read_documents(path: Path) -> Iterator[str]:
    """The documents of one input file, by its suffix: .jsonl, .parquet, anything else text."""
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        return _jsonl_documents(path)
    if suffix == ".parquet":
        return _parquet_documents(path)
    return iter([_text_document(path)])


def _text_document(path: Path) -> str:
    raw = _read(path)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CorpusInputError(f"{path}: byte {exc.start} is not UTF-8 (text inputs must be UTF-8)") from exc


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise CorpusInputError(f"{path}: cannot read ({exc.strerror})") from exc


def _jsonl_documents(path: Path) -> Iterator[str]:
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise CorpusInputError(f"{path}: cannot read ({exc.strerror})") from exc
    with handle:
        for lineno, line in enumerate(handle, 1):
            if line.strip():  # blank lines (a trailing newline, say) hold no document
                yield _jsonl_text(line, f"{path}:{lineno}")


def _jsonl_text(line: bytes, where: str) -> str:
    try:
        record = json.loads(line)
    except json.JSONDecodeError as exc:
        raise CorpusInputError(f"{where}: bad JSON ({exc.msg} at column {exc.colno})") from exc
    except UnicodeDecodeError as exc:
        raise CorpusInputError(f"{where}: not UTF-8") from exc
    if not isinstance(record, dict) or "text" not in record:
        raise CorpusInputError(f'{where}: no "text" field (each line must be an object with a "text" string)')
    text = record["text"]
    if not isinstance(text, str):
        raise CorpusInputError(f'{where}: "text" is {type(text).__name__}, not a string')
    return text


def _parquet_documents(path: Path) -> Iterator[str]:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise CorpusInputError(f"{path}: reading Parquet needs pyarrow (pip install pyarrow)") from exc
    try:
        table = pq.ParquetFile(path)
        column = table.schema_arrow.field("text") if "text" in table.schema_arrow.names else None
        if column is None:
            raise CorpusInputError(f'{path}: no "text" column (columns: {", ".join(table.schema_arrow.names)})')
        if not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
            raise CorpusInputError(f'{path}: the "text" column is {column.type}, not a string column')
        row = 0
        for batch in table.iter_batches(batch_size=PARQUET_ROWS, columns=["text"]):
            texts = batch.column(0).to_pylist()
            if None in texts:
                raise CorpusInputError(f'{path}: row {row + texts.index(None)}: "text" is null')
            yield from texts
            row += len(texts)
    except (OSError, pa.ArrowException) as exc:  # ArrowInvalid for a file that is not Parquet
        raise CorpusInputError(f"{path}: not a readable Parquet file ({exc})") from exc


def document_batches(files: list[Path]) -> Iterator[tuple[list[str], int]]:
    """Every file's documents in order, in batches of about BATCH_CHARS characters; with each
    batch, how many files had been read in full before its last document."""
    batch: list[str] = []
    chars = 0
    for read, path in enumerate(files):
        for doc in read_documents(path):
            batch.append(doc)
            chars += len(doc)
            if chars >= BATCH_CHARS or len(batch) >= BATCH_DOCS:
                yield batch, read
                batch, chars = [], 0
    if batch:
        yield batch, len(files)


# ---------------------------------------------------------------------------------------
# tokenizers


def load_tokenizer(path: Path, eos_token: str | None = None) -> LoadedTokenizer:
    """A tokenizer.json, hashed over exactly the bytes it is built from."""
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise TokenizerError(f"{path}: cannot read the tokenizer ({exc.strerror})") from exc
    return parse_tokenizer(raw, path, eos_token)


def parse_tokenizer(raw: bytes, path: Path, eos_token: str | None = None) -> LoadedTokenizer:
    """The tokenizer.json bytes `raw` (named `path` in errors), hashed over exactly those bytes."""
    from tokenizers import Tokenizer

    try:
        tokenizer = Tokenizer.from_str(raw.decode("utf-8"))
    except Exception as exc:  # tokenizers raises a bare Exception for a malformed file
        raise TokenizerError(f"{path}: not a Hugging Face tokenizer.json ({exc})") from exc
    tokenizer.encode_special_tokens = True  # a document's text never turns into a special token
    eos_id = _eos_id(tokenizer, path, eos_token)
    vocab = tokenizer.get_vocab_size(with_added_tokens=True)
    return LoadedTokenizer(tokenizer, content_hash(raw).hex(), vocab, eos_id)


def _eos_id(tokenizer: Any, path: Path, eos_token: str | None) -> int:
    names = (eos_token,) if eos_token is not None else EOS_CANDIDATES
    for name in names:
        token_id = tokenizer.token_to_id(name)
        if token_id is not None:
            return int(token_id)
    if eos_token is not None:
        raise TokenizerError(f"{path}: has no token {eos_token!r} (--eos-token)")
    raise TokenizerError(f"{path}: has none of {', '.join(EOS_CANDIDATES)}; name its end-of-document "
                         f"token with --eos-token")


def train_tokenizer(files: list[Path], vocab_size: int, out: Path) -> None:
    """Train a byte-level BPE of at most `vocab_size` tokens (fewer when the corpus runs out of
    merges) on the documents of `files`, and write it to `out` (refused if `out` exists)."""
    check_tokenizer_target(vocab_size, out)
    atomic_write(Path(out), trained_tokenizer(files, vocab_size), mode=FILE_MODE)


def check_tokenizer_target(vocab_size: int, out: Path) -> None:
    """Refuse, before any work, a vocab out of range or an `out` that exists: a run may
    already pin that tokenizer's hash."""
    if not MIN_TRAINED_VOCAB <= vocab_size <= MAX_VOCAB:
        raise TokenizerError(f"--train-tokenizer {vocab_size}: a byte-level BPE needs a vocab of "
                             f"{MIN_TRAINED_VOCAB}..{MAX_VOCAB} (256 bytes + end of document)")
    if Path(out).exists():
        raise TokenizerError(f"{out} exists: delete it to train a new tokenizer, or drop "
                             f"--train-tokenizer to pack with it")


def trained_tokenizer(files: list[Path], vocab_size: int) -> bytes:
    """The tokenizer.json bytes of a byte-level BPE of at most `vocab_size` tokens trained on
    the documents of `files` (kept in memory: `veritrain data pack` writes it only once the
    corpus it packs is big enough for a run)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[TRAINED_EOS], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())  # every byte encodes
    tokenizer.train_from_iterator((batch for batch, _ in document_batches(files)), trainer)
    return str(tokenizer.to_str(pretty=True)).encode("utf-8")


# ---------------------------------------------------------------------------------------
# packing


def encode_batch(tok: LoadedTokenizer, docs: list[str]) -> np.ndarray:
    """The tokens of `docs`, each followed by the end-of-document token, as int64."""
    encodings = tok.tokenizer.encode_batch(docs, add_special_tokens=False)
    count = sum(len(e.ids) for e in encodings) + len(encodings)
    ids = itertools.chain.from_iterable((*e.ids, tok.eos_id) for e in encodings)
    tokens = np.fromiter(ids, dtype=np.int64, count=count)
    if count and int(tokens.max()) >= tok.vocab_size:  # a tokenizer.json whose ids exceed its own vocab
        raise TokenizerError(f"tokenizer produced token {int(tokens.max())} >= its vocab size {tok.vocab_size}")
    return tokens


def pack(files: list[Path], tok: LoadedTokenizer, out: Path,
         progress: Callable[[PackProgress], None] | None = None,
         layout: tuple[int, int] | None = None) -> PackedMeta:
    """Tokenize `files` into `out` and its sidecar, both written atomically (the .bin first:
    a crash between the two leaves a content hash that no longer matches, caught on load).
    With `layout` (page_tokens, heldout_every), a corpus too small for a run with that paging
    is refused (`CorpusTooSmall`) and nothing is written."""
    width = token_width(tok.vocab_size)
    dtype = token_dtype(width)
    hasher = content_hasher()
    documents = tokens = 0
    with atomic_stream(Path(out), FILE_MODE) as handle:
        for docs, files_read in document_batches(files):
            chunk = encode_batch(tok, docs).astype(dtype).tobytes()
            handle.write(chunk)
            hasher.update(chunk)
            documents, tokens = documents + len(docs), tokens + len(chunk) // width
            if progress is not None:
                progress(PackProgress(files_read, len(files), documents, tokens))
        if documents == 0:
            raise CorpusInputError(f"no documents in {len(files)} input files")
        if layout is not None:  # inside the stream: refused, the partial file is removed
            check_corpus_size(tokens, *layout, where=f"the inputs ({len(files)} file{'s' * (len(files) != 1)})")
    meta = PackedMeta(format_version=PACKED_FORMAT_VERSION, token_width=width, vocab_size=tok.vocab_size,
                      tokenizer_hash=tok.hash, tokens=tokens, content_hash=hasher.hexdigest(),
                      source_files=len(files), documents=documents, eos_token_id=tok.eos_id)
    atomic_write(sidecar_path(Path(out)), (meta.model_dump_json(indent=2) + "\n").encode(), mode=FILE_MODE)
    return meta
