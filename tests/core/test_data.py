from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from protocol.config import corpus
from protocol.core.crypto.hashing import merkle_root
from protocol.core.train import data
from protocol.core.train.data import Dataset, DatasetError, DatasetMismatch


def test_pages_hashes_and_root(ds: Dataset) -> None:
    assert ds.n_pages == 292 and ds.page_tokens == 1024
    assert ds.root == merkle_root(ds.page_hashes)
    assert ds.page_hashes[3] == data.page_hash(ds.page(3))
    assert len(set(ds.page_hashes)) == ds.n_pages


def test_heldout_split_is_spread_and_disjoint(ds: Dataset) -> None:
    held, train = set(ds.heldout_pages), set(ds.train_pages)
    assert not held & train and len(held | train) == ds.n_pages
    assert len(held) == ds.n_pages // 10
    assert max(held) > ds.n_pages * 0.9 and min(held) < ds.n_pages * 0.1


def test_assignment_deterministic_distinct_train_only(ds: Dataset) -> None:
    seed = data.miner_seed(b"run", 3, b"\x01" * 20)
    a = data.assign_pages(ds, seed, 8)
    assert a == data.assign_pages(ds, seed, 8)
    assert len(set(a)) == 8 and set(a) <= set(ds.train_pages)
    other = data.assign_pages(ds, data.miner_seed(b"run", 3, b"\x02" * 20), 8)
    assert a != other
    assert data.miner_seed(b"run", 3, b"\x01" * 20) != data.miner_seed(b"run", 4, b"\x01" * 20)


def test_batches_come_from_assigned_pages(ds: Dataset) -> None:
    seed = data.miner_seed(b"run", 1, b"\x01" * 20)
    pages = data.assign_pages(ds, seed, 4)
    x, y = data.batch(ds, seed, 5, pages, 4, 32)
    x2, _ = data.batch(ds, seed, 5, pages, 4, 32)
    x3, _ = data.batch(ds, seed, 6, pages, 4, 32)
    assert x.shape == y.shape == (4, 32) and x.dtype == torch.int64
    assert torch.equal(x, x2) and not torch.equal(x, x3)
    assert torch.equal(x[:, 1:], y[:, :-1])
    allowed = np.concatenate([ds.page(p) for p in pages])
    for row in x:
        window = row.numpy().astype(np.uint16)
        hits = np.lib.stride_tricks.sliding_window_view(allowed, 32)
        assert (hits == window).all(axis=1).any()


def test_heldout_batches_depend_on_validator_seed(ds: Dataset) -> None:
    a = data.heldout_batches(ds, b"v1", 2, 4, 32)
    b = data.heldout_batches(ds, b"v2", 2, 4, 32)
    assert len(a) == 2 and not torch.equal(a[0][0], b[0][0])


def test_check_root_says_what_differs(ds: Dataset) -> None:
    data.check_root(ds, ds.root)
    with pytest.raises(DatasetMismatch, match="pages of 1024 tokens"):
        data.check_root(ds, b"\x00" * 32)


def test_folder_and_bin_sources(tmp_path: Path) -> None:
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "z.txt").write_bytes(b"z" * 3000)
    (tmp_path / "a.txt").write_bytes(b"a" * 3000)
    folder = corpus.from_folder(tmp_path, page_tokens=100, heldout_every=4)
    assert folder.n_pages == 60 and folder.tokens[0] == ord("a") and folder.tokens[-1] == ord("z")
    raw = np.arange(1000, dtype="<u2") % 300
    (tmp_path / "c.bin").write_bytes(raw.tobytes())
    binned = corpus.from_bin(tmp_path / "c.bin", vocab_size=300, page_tokens=100, heldout_every=4)
    assert binned.n_pages == 10
    with pytest.raises(DatasetError, match="vocab"):
        corpus.from_bin(tmp_path / "c.bin", page_tokens=100, heldout_every=4)
    (tmp_path / "odd.bin").write_bytes(b"abc")
    with pytest.raises(DatasetError):
        corpus.from_bin(tmp_path / "odd.bin")
    with pytest.raises(DatasetError):
        data.from_bytes(b"tiny", page_tokens=100)


def test_stdlib_default_corpus() -> None:
    root, files = corpus.stdlib_files()
    rel = [p.relative_to(root).parts for p in files]
    assert len(files) > 500
    assert not any("site-packages" in r or "dist-packages" in r for r in rel)
    assert all(p.suffix == ".py" for p in files)
