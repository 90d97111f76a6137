"""`veritrain data pack`: text, JSONL and Parquet in, a packed corpus out, loaded as a run's dataset."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import numpy as np
import pytest

from protocol.config import corpus
from protocol.config import tokenize_pack as tp
from protocol.config.corpus import PackedCorpusError, PackedCorpusMismatch, PackedMeta
from protocol.config.run_config import load_run_config
from protocol.config.run_setup import DatasetSpec
from protocol.config.run_state import load_dataset
from protocol.core.crypto.hashing import content_hash
from protocol.core.errors import ConfigError
from protocol.core.train import data
from tests.conftest import run_cli

VOCAB = 300  # 256 bytes + eos + a few merges: trains in well under a second
PAGE = 16  # tokens per page, so a tiny corpus still has enough pages for a root
HELDOUT = 4

TEXT_A = "The quick brown fox jumps over the lazy dog.\n" * 20
# a document spelling the end-of-document token must not split into two documents
TEXT_B = "# Ünïcode ✓ 🎉\nliteral <|endoftext|> inside a document\n"
RECORDS = [f"record {i}: hello world, {'ab' * i}" for i in range(12)]


def _write_corpus(folder: Path) -> list[str]:
    """The inputs, and the documents they hold in packing order (by relative path)."""
    (folder / "sub").mkdir(parents=True)
    (folder / "a.txt").write_text(TEXT_A)
    (folder / "c.jsonl").write_text("".join(json.dumps({"text": t, "id": i}) + "\n" for i, t in enumerate(RECORDS)) + "\n")
    (folder / "sub" / "b.md").write_text(TEXT_B)
    (folder / ".hidden").write_bytes(b"\xff\xfe not text, and skipped")
    return [TEXT_A, *RECORDS, TEXT_B]


@pytest.fixture(scope="module")
def packed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, PackedMeta, list[str]]:
    root = tmp_path_factory.mktemp("pack")
    docs = _write_corpus(root / "in")
    files = tp.input_files(root / "in")
    tp.train_tokenizer(files, VOCAB, root / "tokenizer.json")
    meta = tp.pack(files, tp.load_tokenizer(root / "tokenizer.json"), root / "corpus.bin")
    return root, root / "corpus.bin", meta, docs


def _split_documents(tokens: np.ndarray, eos: int) -> list[list[int]]:
    ends = np.flatnonzero(tokens == eos)
    assert len(ends) and ends[-1] == len(tokens) - 1  # every document, the last too, ends with eos
    starts = np.concatenate([[0], ends[:-1] + 1])
    return [tokens[s:e].tolist() for s, e in zip(starts, ends, strict=True)]


def test_packed_tokens_decode_back_to_the_documents(packed) -> None:
    root, out, meta, docs = packed
    tok = tp.load_tokenizer(root / "tokenizer.json")
    tokens = corpus.packed_tokens(out, corpus.read_packed_meta(out))
    assert meta.token_width == 2 and tokens.dtype == np.dtype("<u2") and len(tokens) == meta.tokens
    assert meta.source_files == 3 and meta.documents == len(docs)  # .hidden skipped
    assert [tok.tokenizer.decode(d) for d in _split_documents(np.asarray(tokens), meta.eos_token_id)] == docs
    assert meta.vocab_size == tok.vocab_size <= VOCAB and meta.eos_token_id == 0
    assert meta.tokenizer_hash == content_hash((root / "tokenizer.json").read_bytes()).hex()


def test_training_and_packing_are_reproducible(packed, tmp_path: Path) -> None:
    root, out, meta, _ = packed
    files = tp.input_files(root / "in")
    tp.train_tokenizer(files, VOCAB, tmp_path / "tokenizer.json")
    assert (tmp_path / "tokenizer.json").read_bytes() == (root / "tokenizer.json").read_bytes()
    again = tp.pack(files, tp.load_tokenizer(tmp_path / "tokenizer.json"), tmp_path / "again.bin")
    assert (tmp_path / "again.bin").read_bytes() == out.read_bytes() and again.content_hash == meta.content_hash
    kw = {"page_tokens": PAGE, "heldout_every": HELDOUT}
    first, second = corpus.from_packed(out, **kw), corpus.from_packed(tmp_path / "again.bin", **kw)
    assert first.root == second.root and first.n_pages == meta.tokens // PAGE


def test_a_repack_into_the_input_folder_skips_its_own_outputs(packed) -> None:
    root, _, meta, _ = packed
    out, tokenizer = root / "in" / "corpus.bin", root / "tokenizer.json"
    for _ in range(2):  # the second pack finds the first's .bin and .json among its inputs
        files = tp.input_files(root / "in", exclude=(out, corpus.sidecar_path(out), tokenizer))
        repacked = tp.pack(files, tp.load_tokenizer(tokenizer), out)
    assert repacked == meta


def test_spec_loads_packed_corpus_and_checks_the_tokenizer(packed) -> None:
    _, out, meta, _ = packed
    spec = DatasetSpec(source="packed", path=str(out), page_tokens=PAGE, heldout_every=HELDOUT,
                       tokenizer_hash=meta.tokenizer_hash, vocab_size=meta.vocab_size)
    ds = load_dataset(spec)
    assert ds.vocab_size == meta.vocab_size and ds.root == corpus.from_packed(out, page_tokens=PAGE, heldout_every=HELDOUT).root
    with pytest.raises(ConfigError, match="tokenizer_hash 0000000000000000… differs"):
        load_dataset(spec.model_copy(update={"tokenizer_hash": "0" * 64}))
    with pytest.raises(PackedCorpusMismatch, match=f"vocab_size 999 differs from .*'s {meta.vocab_size}"):
        load_dataset(spec.model_copy(update={"vocab_size": 999}))
    with pytest.raises(ConfigError, match="apply to source 'packed'"):
        DatasetSpec(source="folder", path=str(out), tokenizer_hash=meta.tokenizer_hash)


def test_tokenizer_hash_is_part_of_the_run_config_hash(tmp_path: Path) -> None:
    def config_hash(tokenizer_hash: str) -> str:
        path = tmp_path / "run.toml"
        path.write_text(f'[training.dataset]\nsource = "packed"\npath = "c.bin"\ntokenizer_hash = "{tokenizer_hash}"\n')
        return load_run_config(path).config_hash()

    assert config_hash("a" * 64) != config_hash("b" * 64)


def test_bad_jsonl_lines_are_named_by_file_and_line(tmp_path: Path) -> None:
    cases = {'{"text": "ok"}\n{"text": "ok"\n': r"bad\.jsonl:2: bad JSON",
             '{"text": "ok"}\n\n{"body": "x"}\n': r'bad\.jsonl:3: no "text" field',
             '{"text": 5}\n': r'bad\.jsonl:1: "text" is int, not a string',
             '["text"]\n': r'bad\.jsonl:1: no "text" field'}
    tok = _byte_tokenizer(tmp_path)
    for body, message in cases.items():
        (tmp_path / "bad.jsonl").write_text(body)
        with pytest.raises(tp.CorpusInputError, match=message):
            tp.pack(tp.input_files(tmp_path / "bad.jsonl"), tok, tmp_path / "out.bin")
        assert not (tmp_path / "out.bin").exists()  # nothing half-written under the final name
        assert not [p for p in tmp_path.iterdir() if p.name.startswith(".partial-")]


def test_other_bad_inputs_are_typed_errors(tmp_path: Path) -> None:
    tok = _byte_tokenizer(tmp_path)
    (tmp_path / "bin.txt").write_bytes(b"ok \xff")
    with pytest.raises(tp.CorpusInputError, match=r"bin\.txt: byte 3 is not UTF-8"):
        tp.pack([tmp_path / "bin.txt"], tok, tmp_path / "out.bin")
    (tmp_path / "empty.jsonl").write_text("\n\n")
    with pytest.raises(tp.CorpusInputError, match="no documents"):
        tp.pack([tmp_path / "empty.jsonl"], tok, tmp_path / "out.bin")
    with pytest.raises(tp.CorpusInputError, match="no such file"):
        tp.input_files(tmp_path / "missing")
    (tmp_path / "broken.json").write_text("{not json")
    with pytest.raises(tp.TokenizerError, match="not a Hugging Face tokenizer.json"):
        tp.load_tokenizer(tmp_path / "broken.json")
    with pytest.raises(tp.TokenizerError, match="has no token '<bos>'"):
        tp.load_tokenizer(tmp_path / "tokenizer.json", eos_token="<bos>")
    with pytest.raises(tp.TokenizerError, match="exists"):
        tp.train_tokenizer([tmp_path / "bin.txt"], VOCAB, tmp_path / "tokenizer.json")
    with pytest.raises(tp.TokenizerError, match="257"):
        tp.train_tokenizer([tmp_path / "bin.txt"], 100, tmp_path / "new.json")


def test_loader_refuses_a_bin_that_disagrees_with_its_sidecar(packed, tmp_path: Path) -> None:
    _, out, _, _ = packed
    raw = out.read_bytes()
    copy = tmp_path / "c.bin"
    corpus.sidecar_path(copy).write_bytes(corpus.sidecar_path(out).read_bytes())
    copy.write_bytes(raw[:-2] + bytes([raw[-2] ^ 1, raw[-1]]))
    with pytest.raises(PackedCorpusError, match="content differs"):
        corpus.from_packed(copy, page_tokens=PAGE, heldout_every=HELDOUT)
    copy.write_bytes(raw[:-1])
    with pytest.raises(PackedCorpusError, match="sidecar says"):
        corpus.from_packed(copy)
    corpus.sidecar_path(copy).write_text('{"format_version": 2}')
    with pytest.raises(PackedCorpusError, match="format_version"):
        corpus.from_packed(copy)
    with pytest.raises(PackedCorpusError, match="cannot read its sidecar"):
        corpus.from_packed(tmp_path / "nothing.bin")


def test_uint32_packed_corpus_round_trips(tmp_path: Path) -> None:
    """A vocab over 65536 (no 70k-token tokenizer trained: the tokens are synthetic)."""
    tokens = ((np.arange(2000) * 7919) % 70_000).astype("<u4")
    raw = tokens.tobytes()
    meta = PackedMeta(format_version=1, token_width=4, vocab_size=70_000, tokenizer_hash="ab" * 32, tokens=2000,
                      content_hash=content_hash(raw).hex(), source_files=1, documents=1, eos_token_id=0)
    (tmp_path / "c.bin").write_bytes(raw)
    corpus.sidecar_path(tmp_path / "c.bin").write_text(meta.model_dump_json())
    ds = corpus.from_packed(tmp_path / "c.bin", page_tokens=100, heldout_every=4)
    assert ds.token_width == 4 and ds.root == data.from_tokens(tokens, "x", 100, 4, vocab_size=70_000).root
    with pytest.raises(ValueError, match="does not fit"):
        PackedMeta.model_validate({**meta.model_dump(), "token_width": 2})


def test_parquet_text_column(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    texts = [f"row {i} of a parquet file" for i in range(30)]
    pq.write_table(pa.table({"text": texts, "n": list(range(30))}), tmp_path / "t.parquet", row_group_size=7)
    tok = _byte_tokenizer(tmp_path)
    meta = tp.pack([tmp_path / "t.parquet"], tok, tmp_path / "p.bin")
    docs = _split_documents(np.fromfile(tmp_path / "p.bin", dtype="<u2"), meta.eos_token_id)
    assert meta.documents == 30 and [tok.tokenizer.decode(d) for d in docs] == texts
    pq.write_table(pa.table({"body": ["x"]}), tmp_path / "no_text.parquet")
    with pytest.raises(tp.CorpusInputError, match='no "text" column'):
        tp.pack([tmp_path / "no_text.parquet"], tok, tmp_path / "p.bin")
    pq.write_table(pa.table({"text": ["x", None]}), tmp_path / "null.parquet")
    with pytest.raises(tp.CorpusInputError, match='row 1: "text" is null'):
        tp.pack([tmp_path / "null.parquet"], tok, tmp_path / "p.bin")
    (tmp_path / "fake.parquet").write_text("not parquet")
    with pytest.raises(tp.CorpusInputError, match="not a readable Parquet file"):
        tp.pack([tmp_path / "fake.parquet"], tok, tmp_path / "p.bin")


def test_cli_end_to_end(tmp_path: Path) -> None:
    """Train, pack, and paste the printed TOML: it loads to the printed dataset root."""
    _write_corpus(tmp_path / "in")
    tokenizer, out = tmp_path / "tok.json", tmp_path / "in" / "corpus.bin"
    args = ("data", "pack", "--tokenizer", str(tokenizer), "--input", str(tmp_path / "in"), "--out", str(out),
            "--page-tokens", str(PAGE), "--heldout-every", str(HELDOUT))
    result = run_cli(*args, "--train-tokenizer", str(VOCAB), timeout=120)
    assert result.code == 0, result.stderr
    assert "3/3 files read" in result.stderr and "training a byte-level BPE" in result.stderr
    figures = dict(line.split(None, 1) for line in result.stdout.splitlines()[:2])
    assert figures["files"] == "3"
    root = next(line.split()[-1] for line in result.stdout.splitlines() if line.startswith("dataset root"))
    pasted = tomllib.loads(result.stdout.split("# paste into run.toml:", 1)[1])
    spec = DatasetSpec.model_validate(pasted["training"]["dataset"])
    meta = corpus.read_packed_meta(out)
    assert spec.tokenizer_hash == meta.tokenizer_hash and pasted["training"]["model"]["vocab_size"] == meta.vocab_size
    assert load_dataset(spec).root.hex() == root
    # a second run with the tokenizer it wrote: same root; bad input: one error line
    assert root in run_cli(*args, timeout=120).stdout
    (tmp_path / "in" / "z.jsonl").write_text('{"text": "fine"}\nnot json\n')
    failed = run_cli(*args, timeout=120)
    lines = [line for line in failed.stderr.splitlines() if line.strip()]
    assert failed.code == 1 and lines[-1].startswith("error:") and "z.jsonl:2: bad JSON" in lines[-1]
    assert "Traceback" not in failed.stderr


def _byte_tokenizer(folder: Path) -> tp.LoadedTokenizer:
    """A tokenizer trained on almost nothing: about bytes plus the end-of-document token."""
    (folder / "seed.txt").write_text("seed text")
    if not (folder / "tokenizer.json").exists():
        tp.train_tokenizer([folder / "seed.txt"], MIN_VOCAB, folder / "tokenizer.json")
    return tp.load_tokenizer(folder / "tokenizer.json")


MIN_VOCAB = tp.MIN_TRAINED_VOCAB


def test_deploy_pins_the_tokenizer_hash_and_vocabulary_from_the_sidecar(packed) -> None:
    from protocol.config.run_setup import TrainingSpec
    from protocol.config.run_state import with_packed_facts

    _, bin_path, meta, _ = packed
    spec = TrainingSpec.model_validate({"dataset": {"source": "packed", "path": str(bin_path), "page_tokens": PAGE,
                                                    "heldout_every": HELDOUT}})
    pinned = with_packed_facts(spec).dataset
    assert (pinned.tokenizer_hash, pinned.vocab_size) == (meta.tokenizer_hash, meta.vocab_size)
    assert with_packed_facts(TrainingSpec()) == TrainingSpec()  # a byte corpus has nothing to pin


def test_the_minimum_corpus_is_what_the_paging_accepts() -> None:
    """`min_corpus_tokens` is exactly the fewest tokens `from_tokens` cuts into a dataset."""
    for page, heldout in ((PAGE, HELDOUT), (data.DEFAULT_PAGE_TOKENS, data.DEFAULT_HELDOUT_EVERY)):
        need = corpus.min_corpus_tokens(page, heldout)
        assert data.from_tokens(np.zeros(need, np.uint16), "t", page, heldout).n_pages == heldout
        with pytest.raises(data.DatasetError, match="too few"):
            data.from_tokens(np.zeros(need - 1, np.uint16), "t", page, heldout)
    assert corpus.min_corpus_tokens(data.DEFAULT_PAGE_TOKENS, data.DEFAULT_HELDOUT_EVERY) == 81_920  # the docs' figure


def test_a_corpus_too_small_for_a_run_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    """59k tokens at the default paging (14 pages of 4096): one error line with the minimum,
    exit 1, no paste lines, no corpus, sidecar or trained tokenizer left behind."""
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.txt").write_text("x" * 59_000)  # a byte-level vocab: one token a byte
    out, tokenizer = tmp_path / "out" / "corpus.bin", tmp_path / "tok.json"
    result = run_cli("data", "pack", "--tokenizer", str(tokenizer), "--input", str(tmp_path / "in"),
                     "--out", str(out), "--train-tokenizer", str(MIN_VOCAB), timeout=120)
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert result.code == 1 and len(errors) == 1, result.stderr
    assert "too few for a run, which needs at least 20 pages (81,920 tokens)" in errors[0], errors[0]
    assert "paste" not in result.stdout and "dataset root" not in result.stdout and "Traceback" not in result.stderr
    assert not tokenizer.exists() and not out.exists() and not corpus.sidecar_path(out).exists()
    assert not any(p.name.startswith(".partial-") for p in tmp_path.rglob("*"))


def test_pack_refuses_below_the_layout_minimum_and_keeps_an_earlier_pack(packed, tmp_path: Path) -> None:
    root, _, meta, _ = packed
    files = tp.input_files(root / "in", exclude=[root / "in" / "corpus.bin", root / "in" / "corpus.bin.json"])
    tok = tp.load_tokenizer(root / "tokenizer.json")
    out = tmp_path / "corpus.bin"
    tp.pack(files, tok, out, layout=(PAGE, HELDOUT))
    before = out.read_bytes()
    too_many = meta.tokens // HELDOUT + PAGE  # pages so long that the corpus holds fewer than HELDOUT
    with pytest.raises(corpus.CorpusTooSmall, match=f"at least {HELDOUT} pages"):
        tp.pack(files, tok, out, layout=(too_many, HELDOUT))
    assert out.read_bytes() == before and corpus.read_packed_meta(out) == meta
