"""Token width: uint16 pages hash exactly as before; a vocab over 65536 gives uint32 pages
under their own hash domain; out-of-range tokens are refused, never wrapped."""

from __future__ import annotations

import numpy as np
import pytest

from protocol.core.crypto.hashing import blake3_hash
from protocol.core.train import data
from protocol.core.train.data import DatasetError

# made with the uint16-only data.py this generalises: existing dataset roots must not move
U16_PAGE_GOLDEN = "950a17860cc22dcb4e0ace512becdbe4cc9c665d41bbe41d2273cd453ff3476c"
U16_ROOT_GOLDEN = "f91fd301de7bd0a25a7bf1fe28d8ced5d65a70ab82dee8caa6390a99afe933a4"


def test_uint16_pages_and_roots_are_unchanged() -> None:
    page = np.arange(0, 4096 * 3, 3, dtype=np.int64) % 256
    assert data.page_hash(page).hex() == U16_PAGE_GOLDEN
    ds = data.from_bytes(bytes(range(256)) * 40, page_tokens=64, heldout_every=4)
    assert ds.root.hex() == U16_ROOT_GOLDEN and ds.n_pages == 160
    assert ds.token_width == 2 and ds.tokens.dtype == np.uint16


@pytest.mark.parametrize(("vocab", "width"), [(1, 2), (256, 2), (65536, 2), (65537, 4), (1 << 32, 4)])
def test_width_follows_vocab(vocab: int, width: int) -> None:
    assert data.token_width(vocab) == width


@pytest.mark.parametrize("vocab", [0, (1 << 32) + 1])
def test_vocab_out_of_range_is_refused(vocab: int) -> None:
    with pytest.raises(DatasetError, match="vocab size"):
        data.token_width(vocab)


def test_large_vocab_gives_uint32_pages_under_their_own_domain() -> None:
    tokens = (np.arange(800, dtype=np.int64) * 97) % 70_000
    ds = data.from_tokens(tokens, "synthetic", page_tokens=100, heldout_every=4, vocab_size=70_000)
    assert ds.token_width == 4 and ds.tokens.dtype == np.uint32
    assert int(ds.tokens.max()) > 65535 and np.array_equal(ds.tokens, tokens)  # nothing wrapped
    assert ds.page_hashes[2] == blake3_hash("page-u32", tokens[200:300].astype("<u4").tobytes())
    assert ds.page_hashes[2] == data.page_hash(ds.page(2), 4)
    # the same small token values hash differently at the two widths
    small = np.arange(100) % 256
    assert data.page_hash(small, 2) != data.page_hash(small, 4)


def test_tokens_beyond_the_vocab_are_refused_not_wrapped() -> None:
    tokens = np.full(800, 65536 + 7, dtype=np.int64)  # as uint16 this would wrap to 7
    with pytest.raises(DatasetError, match="65543 >= vocab size 65536"):
        data.from_tokens(tokens, "wide", page_tokens=100, heldout_every=4, vocab_size=65536)
    with pytest.raises(DatasetError, match="negative"):
        data.from_tokens(np.full(800, -1), "neg", page_tokens=100, heldout_every=4)
    with pytest.raises(DatasetError, match="integers"):
        data.from_tokens(np.zeros(800, dtype=np.float32), "float", page_tokens=100, heldout_every=4)
    with pytest.raises(DatasetError, match="width 3"):
        data.page_hash(np.zeros(4), 3)
