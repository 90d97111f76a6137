"""A validator's replay witnesses of one round, as one blob whose content hash it reveals.

On chain a reveal carries only `witness_root`, the blake3 content hash of this bundle (so the
reveal costs the same for any number of miners); the bundle itself is served over p2p like any
blob, by that hash, and auditors fetch it to learn, per column, the challenge signature σ the
validator checked under and its witness. Layout: per column in commit order, the 32-byte
witness then the 64-byte σ; nothing else, so its size is fixed by the column count.
"""

from __future__ import annotations

from collections.abc import Sequence

from protocol.core.crypto.hashing import content_hash
from protocol.core.errors import VeritrainError

WITNESS_BYTES = 32
SIG_BYTES = 64
ENTRY_BYTES = WITNESS_BYTES + SIG_BYTES


class WitnessBundleError(VeritrainError):
    """Raised for a bundle of the wrong size or entries of the wrong length."""


def encode_bundle(entries: Sequence[tuple[bytes, bytes]]) -> bytes:
    """The bundle of (witness, σ) per column, in commit order."""
    out = bytearray()
    for witness, sig in entries:
        if len(witness) != WITNESS_BYTES or len(sig) != SIG_BYTES:
            raise WitnessBundleError(f"a bundle entry is a {WITNESS_BYTES}-byte witness and a {SIG_BYTES}-byte σ")
        out += witness + sig
    return bytes(out)


def decode_bundle(data: bytes, columns: int) -> list[tuple[bytes, bytes]]:
    """The (witness, σ) of each of `columns` columns; the size must match exactly."""
    if len(data) != columns * ENTRY_BYTES:
        raise WitnessBundleError(f"a bundle for {columns} columns is {columns * ENTRY_BYTES} bytes, not {len(data)}")
    return [(data[i:i + WITNESS_BYTES], data[i + WITNESS_BYTES:i + ENTRY_BYTES])
            for i in range(0, len(data), ENTRY_BYTES)]


def bundle_root(data: bytes) -> bytes:
    """The `witness_root` a reveal carries: the bundle's content hash."""
    return bytes(content_hash(data))
