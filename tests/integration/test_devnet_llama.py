"""`veritrain devnet` on a real model setup: a Llama decoder started from a Hugging Face
checkpoint (`--genesis`), trained on a corpus tokenized by `veritrain data pack` with a BPE
tokenizer trained on it (`--dataset`). Every miner is verified and paid, the round attests a
model, and that model exports back to a folder `transformers` loads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from protocol.config import corpus
from tests.conftest import run_cli

pytestmark = pytest.mark.slow
transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")

VOCAB = 320


def _text_corpus(folder: Path, n_bytes: int = 420_000) -> None:
    """A slice of the standard library's sources as plain text files (offline, deterministic)."""
    root, files = corpus.stdlib_files()
    folder.mkdir()
    total = 0
    for i, path in enumerate(sorted(files, key=lambda p: p.relative_to(root).as_posix())):
        text = path.read_text(errors="replace")
        (folder / f"{i:05d}.txt").write_text(text)
        total += len(text)
        if total >= n_bytes:
            return


def test_a_llama_devnet_on_a_packed_corpus_from_a_hugging_face_genesis(tmp_path: Path) -> None:
    _text_corpus(tmp_path / "text")
    packed = run_cli("data", "pack", "--tokenizer", str(tmp_path / "tokenizer.json"), "--input", str(tmp_path / "text"),
                     "--out", str(tmp_path / "corpus.bin"), "--train-tokenizer", str(VOCAB), timeout=300)
    assert packed.code == 0, packed.stderr[-2000:]
    meta = corpus.read_packed_meta(tmp_path / "corpus.bin")
    assert meta.vocab_size == VOCAB and meta.token_width == 2

    hf = transformers.LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                                  rms_norm_eps=1e-5, tie_word_embeddings=False)
    torch.manual_seed(1)
    transformers.LlamaForCausalLM(hf).save_pretrained(tmp_path / "ckpt")

    out = tmp_path / "out"
    result = run_cli("devnet", "--miners", "2", "--validators", "1", "--rounds", "1", "--preset", "llama-micro",
                     "--genesis", str(tmp_path / "ckpt"), "--dataset", str(tmp_path / "corpus.bin"),
                     "--inner-steps", "6", "--checkpoint-every", "3", "--commit-window", "60", "--out", str(out),
                     "--timeout", "400", timeout=600)
    assert result.code == 0, (result.stdout[-2000:], result.stderr[-3000:])
    # the corpus holds tokens up to 319, so the run can only have trained the checkpoint's 320-token model
    assert f"vocabulary {VOCAB}" in result.stderr and "genesis: the Hugging Face Llama checkpoint" in result.stderr
    report = json.loads((out / "report.json").read_text())
    (round0,) = report["rounds"]
    assert round0["model_hash"].startswith("0x")
    miners = round0["miners"]
    assert len(miners) == 2 and all(m["committed"] and m["verified"] and m["reward"] > 0 for m in miners), miners
