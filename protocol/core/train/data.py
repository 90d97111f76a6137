"""Corpus -> content-addressed token pages -> dataset root; deterministic sampling.

A dataset is one token stream cut into fixed-size pages (a trailing partial page is
dropped). Tokens are 2 bytes wide when the vocabulary fits (<= 65536), else 4. A page's hash
covers its tokens as little-endian uint16 (domain "page") or uint32 (domain "page-u32"), and
the dataset root is the Merkle root over the page hashes. Every `heldout_every`-th page (index % heldout_every ==
heldout_every - 1) is held out for validators' usefulness scoring, spread over the corpus.

Randomness comes only from `seed_int` (blake3 counters), never from numpy or torch RNGs,
so page assignment and batch choice are stable across library versions and machines.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import torch
from torch import Tensor

from protocol.core.crypto.hashing import Digest, blake3_hash, merkle_root, seed_int, u64
from protocol.core.errors import VeritrainError
from protocol.core.train.data_defaults import (  # re-exported
    DEFAULT_HELDOUT_EVERY,
    DEFAULT_PAGE_TOKENS,
)

MAX_U16_VOCAB = 1 << 16  # the largest vocabulary whose tokens fit in 2 bytes
MAX_VOCAB = 1 << 32  # 4-byte tokens: the widest a page holds
# token width -> (page hash domain, little-endian dtype). The uint16 entry is the format every
# existing dataset root was made with; uint32 pages get their own domain, so the same small
# token values hashed at the two widths can never be confused.
_PAGE_FORMATS = {2: ("page", "<u2"), 4: ("page-u32", "<u4")}
TokenWidth = Literal[2, 4]  # bytes per token


class DatasetError(VeritrainError):
    """Raised when a corpus cannot be read or cut into pages (empty, bad .bin, bad token)."""


class DatasetMismatch(VeritrainError):
    """Raised when the local dataset root differs from the configured (on-chain) one."""


@dataclass(frozen=True)
class Dataset:
    tokens: np.ndarray = field(repr=False)  # (n_pages * page_tokens,) uint16, or uint32 for a large vocab
    page_tokens: int
    heldout_every: int
    source: str  # human description, shown in DatasetMismatch messages
    page_hashes: tuple[Digest, ...] = field(repr=False)
    root: Digest
    vocab_size: int = 256  # every token is below it; byte corpora use 256

    @property
    def token_width(self) -> TokenWidth:
        return token_width(self.vocab_size)

    @property
    def n_pages(self) -> int:
        return len(self.page_hashes)

    @property
    def train_pages(self) -> list[int]:
        return [i for i in range(self.n_pages) if i % self.heldout_every != self.heldout_every - 1]

    @property
    def heldout_pages(self) -> list[int]:
        return [i for i in range(self.n_pages) if i % self.heldout_every == self.heldout_every - 1]

    def page(self, index: int) -> np.ndarray:
        return self.tokens[index * self.page_tokens : (index + 1) * self.page_tokens]


def token_width(vocab_size: int) -> TokenWidth:
    """Bytes per token for a vocabulary: 2 up to 65536 tokens, else 4."""
    if not 1 <= vocab_size <= MAX_VOCAB:
        raise DatasetError(f"vocab size {vocab_size} is outside 1..{MAX_VOCAB}")
    return 2 if vocab_size <= MAX_U16_VOCAB else 4


def token_dtype(width: int) -> str:
    """The little-endian numpy dtype of `width`-byte tokens ("<u2" or "<u4")."""
    if width not in _PAGE_FORMATS:
        raise DatasetError(f"token width {width} is not 2 or 4 bytes")
    return _PAGE_FORMATS[width][1]


def page_hash(tokens: np.ndarray, width: int = 2) -> Digest:
    dtype = token_dtype(width)  # refuses a width that has no page format
    return blake3_hash(_PAGE_FORMATS[width][0], tokens.astype(dtype).tobytes())


def _check_token_values(tokens: np.ndarray, source: str, vocab_size: int) -> None:
    """Before any cast to the page dtype, which would wrap an out-of-range token silently."""
    if not np.issubdtype(tokens.dtype, np.integer):
        raise DatasetError(f"{source}: tokens must be integers, not {tokens.dtype}")
    if len(tokens) and int(tokens.min()) < 0:
        raise DatasetError(f"{source}: token {int(tokens.min())} is negative")
    if len(tokens) and int(tokens.max()) >= vocab_size:
        raise DatasetError(f"{source}: token {int(tokens.max())} >= vocab size {vocab_size}")


def from_tokens(
    tokens: np.ndarray,
    source: str,
    page_tokens: int = DEFAULT_PAGE_TOKENS,
    heldout_every: int = DEFAULT_HELDOUT_EVERY,
    vocab_size: int = 256,
) -> Dataset:
    """Cut a token stream into pages and compute page hashes and the dataset root. The token
    width, and so the page hash domain, follows `vocab_size` (`token_width`)."""
    if heldout_every < 2 or page_tokens < 1:
        raise DatasetError("heldout_every must be at least 2 and page_tokens at least 1")
    width = token_width(vocab_size)
    n_pages = len(tokens) // page_tokens
    if n_pages < heldout_every:
        raise DatasetError(f"{source}: {len(tokens)} tokens give {n_pages} pages, too few")
    _check_token_values(tokens, source, vocab_size)
    toks = np.ascontiguousarray(tokens[: n_pages * page_tokens], dtype=f"u{width}")  # native order
    hashes = tuple(page_hash(toks[i * page_tokens : (i + 1) * page_tokens], width) for i in range(n_pages))
    return Dataset(toks, page_tokens, heldout_every, source, hashes, merkle_root(hashes), vocab_size)


def from_bytes(data: bytes, source: str = "bytes", **kw: int) -> Dataset:
    """Byte-level tokens (vocab 256) from raw bytes."""
    return from_tokens(np.frombuffer(data, dtype=np.uint8), source, **kw)


def check_root(ds: Dataset, expected: bytes) -> None:
    """Raise DatasetMismatch, saying what differs, unless `ds.root == expected`."""
    if ds.root != expected:
        raise DatasetMismatch(
            f"dataset root {ds.root.hex()} != configured {expected.hex()}: local corpus is "
            f"{ds.source}, {ds.n_pages} pages of {ds.page_tokens} tokens "
            f"(held out: 1 in {ds.heldout_every}); all nodes must use the same corpus and paging"
        )


# ---------------------------------------------------------------------------------------
# deterministic assignment and batches (docs/PROTOCOL.md: seed = H(run_seed, r, m); H(seed, step))


def miner_seed(run_seed: bytes, round_: int, miner: bytes) -> Digest:
    return blake3_hash("miner-seed", run_seed, u64(round_), miner)


def sample_distinct(seed: bytes, population: Sequence[int], n: int, label: int = 0) -> list[int]:
    """n distinct items of `population` (partial Fisher-Yates driven by blake3 counters)."""
    pool = list(population)
    n = min(n, len(pool))
    for i in range(n):
        j = i + seed_int(seed, label, i) % (len(pool) - i)
        pool[i], pool[j] = pool[j], pool[i]
    return pool[:n]


def assign_pages(ds: Dataset, seed: bytes, n_pages: int) -> list[int]:
    """The training pages a miner with this seed must use (sorted)."""
    return sorted(sample_distinct(seed, ds.train_pages, n_pages, label=0))


def pages_for_round(ds: Dataset, steps: int, batch_size: int, block_size: int, pages_per_miner: int) -> int:
    """How many pages a miner trains on in a round of `steps` steps: `pages_per_miner`, or, for a
    longer round, enough that each token is drawn about once. A long round on a few pages
    overfits them: its update raises the held-out loss and scores 0, so a fast miner would be
    zeroed for its extra work."""
    need = -(-steps * batch_size * block_size // ds.page_tokens)
    return min(len(ds.train_pages), max(pages_per_miner, need))


def batch(ds: Dataset, seed: bytes, step: int, pages: Sequence[int], batch_size: int,
          block_size: int) -> tuple[Tensor, Tensor]:
    """The (x, y) batch of `step`, each (B, T) int64, from windows inside `pages`."""
    if ds.page_tokens <= block_size:
        raise DatasetError(f"page of {ds.page_tokens} tokens cannot hold a block of {block_size}")
    step_seed = blake3_hash("step-seed", seed, u64(step))
    span = ds.page_tokens - block_size  # valid window starts: [0, span)
    rows = []
    for b in range(batch_size):
        r = seed_int(step_seed, b)
        page = pages[r % len(pages)]
        start = page * ds.page_tokens + (r >> 64) % span
        rows.append(ds.tokens[start : start + block_size + 1])
    arr = torch.from_numpy(np.stack(rows).astype(np.int64))  # (B, T+1)
    return arr[:, :-1].contiguous(), arr[:, 1:].contiguous()  # (B, T), (B, T)


def heldout_batches(ds: Dataset, seed: bytes, n: int, batch_size: int,
                    block_size: int) -> list[tuple[Tensor, Tensor]]:
    """n held-out batches chosen by a validator's seed."""
    pages = ds.heldout_pages
    return [batch(ds, seed, 1_000_000 + i, pages, batch_size, block_size) for i in range(n)]
