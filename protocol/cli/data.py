"""`veritrain data pack`: tokenize text, JSONL or Parquet files into a packed corpus for a run."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from protocol.config.atomic import atomic_write
from protocol.core.train.data_defaults import DEFAULT_HELDOUT_EVERY, DEFAULT_PAGE_TOKENS  # no torch

PROGRESS_EVERY_S = 1.0  # at most one progress line a second on stderr

data = typer.Typer(help="Corpora: tokenize and pack text for a run's dataset", no_args_is_help=True)
err_console = Console(stderr=True)


def pack(
    tokenizer: Annotated[Path, typer.Option(help="Hugging Face tokenizer.json (written there with --train-tokenizer)")],
    input: Annotated[Path, typer.Option(help="A folder, or one file: .jsonl (a \"text\" field per line), "
                                              ".parquet (a \"text\" column), anything else UTF-8 text")],
    out: Annotated[Path, typer.Option(help="The packed tokens; the sidecar goes to OUT.json")],
    train_tokenizer: Annotated[int | None, typer.Option(
        "--train-tokenizer", metavar="VOCAB", help="First train a byte-level BPE of this vocab size on the inputs")] = None,
    eos_token: Annotated[str | None, typer.Option(
        help="End-of-document token (default: the first of <|endoftext|>, </s>, <|end_of_text|>, <eos>)")] = None,
    page_tokens: Annotated[int, typer.Option(min=1, help="Tokens per page (the run's [training.dataset] "
                                                         "page_tokens)")] = DEFAULT_PAGE_TOKENS,
    heldout_every: Annotated[int, typer.Option(min=2, help="One page in this many held out (the run's "
                                                           "heldout_every)")] = DEFAULT_HELDOUT_EVERY,
) -> None:
    """Tokenize the inputs into OUT (raw little-endian tokens) and OUT.json, and print the
    dataset root and the training.dataset lines to paste into run.toml. A corpus too small for
    a run (fewer than HELDOUT_EVERY pages of PAGE_TOKENS tokens: 81,920 tokens at the defaults)
    is refused and nothing is written."""
    from protocol.config import tokenize_pack as tp
    from protocol.config.corpus import sidecar_path

    files = tp.input_files(input, exclude=(out, sidecar_path(out), tokenizer))
    trained = None
    if train_tokenizer is not None:
        tp.check_tokenizer_target(train_tokenizer, tokenizer)
        _note(f"training a byte-level BPE tokenizer (vocab {train_tokenizer}) on {len(files)} files")
        trained = tp.trained_tokenizer(files, train_tokenizer)
        tok = tp.parse_tokenizer(trained, tokenizer, eos_token)
    else:
        tok = tp.load_tokenizer(tokenizer, eos_token)
    meta = tp.pack(files, tok, out, _throttled_progress(), layout=(page_tokens, heldout_every))
    if trained is not None:  # written only with a corpus a run can use
        atomic_write(tokenizer, trained, mode=tp.FILE_MODE)
        _note(f"wrote {tokenizer}")
    _report(meta, out, page_tokens, heldout_every)


def _note(message: str) -> None:
    err_console.print(f"[dim]·[/dim] {message}", highlight=False)


def _throttled_progress() -> Any:
    last = [0.0]

    def show(p: Any) -> None:
        now = time.monotonic()
        if now - last[0] >= PROGRESS_EVERY_S or p.files_read == p.files_total:
            last[0] = now
            _note(f"{p.files_read}/{p.files_total} files read, {p.documents:,} documents, {p.tokens:,} tokens")

    return show


def _report(meta: Any, out: Path, page_tokens: int, heldout_every: int) -> None:
    from protocol.config.corpus import from_packed

    pages = meta.tokens // page_tokens
    root = from_packed(out, page_tokens=page_tokens, heldout_every=heldout_every).root.hex()
    rows = [("files", f"{meta.source_files:,}"), ("documents", f"{meta.documents:,}"), ("tokens", f"{meta.tokens:,}"),
            ("pages", f"{pages:,} of {page_tokens} tokens (1 in {heldout_every} held out)"),
            ("vocab size", f"{meta.vocab_size:,}"), ("token width", f"uint{8 * meta.token_width}"),
            ("end of document", f"token {meta.eos_token_id}"), ("tokenizer hash", meta.tokenizer_hash),
            ("dataset root", root)]
    for name, value in rows:
        typer.echo(f"{name:<16} {value}")
    typer.echo("\n# paste into run.toml:")
    typer.echo(toml_lines(meta, out, page_tokens, heldout_every))


def toml_lines(meta: Any, out: Path, page_tokens: int, heldout_every: int) -> str:
    """The run.toml tables that train on this corpus (json.dumps quotes a valid TOML string)."""
    where = "" if out.is_absolute() else "  # relative: read from the working directory of deploy and of every node"
    lines = ["[training.dataset]", 'source = "packed"', f"path = {json.dumps(str(out))}{where}",
             f'tokenizer_hash = "{meta.tokenizer_hash}"', f"vocab_size = {meta.vocab_size}"]
    if page_tokens != DEFAULT_PAGE_TOKENS:
        lines.append(f"page_tokens = {page_tokens}")
    if heldout_every != DEFAULT_HELDOUT_EVERY:
        lines.append(f"heldout_every = {heldout_every}")
    lines += ["[training.model]  # the model's vocabulary must match the tokenizer's",
              f"vocab_size = {meta.vocab_size}"]
    return "\n".join(lines)


def install(app: typer.Typer, wrap: Any) -> None:
    data.command()(wrap(pack))
    app.add_typer(data, name="data")
