"""A validator's replay witnesses of one round, as one blob whose content hash it reveals.

On chain a reveal carries only `witness_root`, the blake3 content hash of this bundle (so the
reveal costs the same for any number of miners); the bundle itself is served over p2p like any
blob, by that hash, and auditors fetch it to learn, per column it checked, the challenge
signature σ the validator checked under and its witness. Layout: one entry per column the
validator checked, in increasing column order: the column as 4 bytes big-endian, the 32-byte
witness, the 64-byte σ. A column it did not check has no entry and reads as `NO_WITNESS` with an
empty σ, so a bundle grows with the miners a validator checks (its committee seats), not with
the network.
"""

from __future__ import annotations

from collections.abc import Mapping

from protocol.core.crypto.hashing import content_hash
from protocol.core.errors import VeritrainError

COLUMN_BYTES = 4
WITNESS_BYTES = 32
SIG_BYTES = 64
ENTRY_BYTES = COLUMN_BYTES + WITNESS_BYTES + SIG_BYTES
BLANK = (bytes(WITNESS_BYTES), bytes(SIG_BYTES))  # a column without an entry: NO_WITNESS, no σ


class WitnessBundleError(VeritrainError):
    """Raised for a bundle whose size, column order or entries are not well formed."""


def encode_bundle(entries: Mapping[int, tuple[bytes, bytes]]) -> bytes:
    """The bundle of the (witness, σ) of each column checked, by column."""
    out = bytearray()
    for column in sorted(entries):
        witness, sig = entries[column]
        if len(witness) != WITNESS_BYTES or len(sig) != SIG_BYTES:
            raise WitnessBundleError(f"a bundle entry is a {WITNESS_BYTES}-byte witness and a {SIG_BYTES}-byte σ")
        if not 0 <= column < 2 ** (8 * COLUMN_BYTES):
            raise WitnessBundleError(f"column {column} does not fit {COLUMN_BYTES} bytes")
        out += column.to_bytes(COLUMN_BYTES, "big") + witness + sig
    return bytes(out)


def decode_bundle(data: bytes, columns: int) -> list[tuple[bytes, bytes]]:
    """The (witness, σ) of each of `columns` columns, `BLANK` where the bundle has no entry;
    entries must be whole, in increasing column order and below `columns`."""
    if len(data) % ENTRY_BYTES or len(data) > columns * ENTRY_BYTES:
        raise WitnessBundleError(f"a bundle for {columns} columns is a whole number of {ENTRY_BYTES}-byte entries, "
                                 f"at most {columns}; it is {len(data)} bytes")
    out = [BLANK] * columns
    last = -1
    for i in range(0, len(data), ENTRY_BYTES):
        column = int.from_bytes(data[i:i + COLUMN_BYTES], "big")
        if not last < column < columns:
            raise WitnessBundleError(f"bundle entry for column {column} after {last}, of {columns} columns")
        body = data[i + COLUMN_BYTES:i + ENTRY_BYTES]
        out[column] = (bytes(body[:WITNESS_BYTES]), bytes(body[WITNESS_BYTES:]))
        last = column
    return out


def bundle_root(data: bytes) -> bytes:
    """The `witness_root` a reveal carries: the bundle's content hash."""
    return bytes(content_hash(data))
