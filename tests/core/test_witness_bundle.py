"""The witness bundle (protocol/core/proof/witness_bundle.py): an entry per column a validator
checked, so its size follows its committee seats, not the network; a malformed bundle is a typed
error, never a silent misreading."""

from __future__ import annotations

import pytest

from protocol.core.proof.witness_bundle import (
    BLANK,
    COLUMN_BYTES,
    ENTRY_BYTES,
    SIG_BYTES,
    WITNESS_BYTES,
    WitnessBundleError,
    decode_bundle,
    encode_bundle,
)


def entry(k: int) -> tuple[bytes, bytes]:
    return bytes([k]) * WITNESS_BYTES, bytes([k + 1]) * SIG_BYTES


def test_a_bundle_holds_the_checked_columns_and_reads_the_rest_as_blanks() -> None:
    data = encode_bundle({7: entry(7), 2: entry(2)})
    assert len(data) == 2 * ENTRY_BYTES
    out = decode_bundle(data, 10)
    assert out[2] == entry(2) and out[7] == entry(7)
    assert [i for i, e in enumerate(out) if e != BLANK] == [2, 7]
    assert decode_bundle(encode_bundle({}), 10) == [BLANK] * 10


def test_its_size_follows_the_columns_checked_not_the_network() -> None:
    assert len(encode_bundle({i: entry(1) for i in range(96)})) == 96 * ENTRY_BYTES  # at 10,000 miners or 100


@pytest.mark.parametrize("data", [
    b"\x00" * (ENTRY_BYTES - 1),  # a partial entry
    (3).to_bytes(COLUMN_BYTES, "big") + b"\x00" * (ENTRY_BYTES - COLUMN_BYTES)
    + (3).to_bytes(COLUMN_BYTES, "big") + b"\x00" * (ENTRY_BYTES - COLUMN_BYTES),  # a column twice
    (5).to_bytes(COLUMN_BYTES, "big") + b"\x00" * (ENTRY_BYTES - COLUMN_BYTES)
    + (4).to_bytes(COLUMN_BYTES, "big") + b"\x00" * (ENTRY_BYTES - COLUMN_BYTES),  # out of order
    (10).to_bytes(COLUMN_BYTES, "big") + b"\x00" * (ENTRY_BYTES - COLUMN_BYTES),  # past the last column
])
def test_a_malformed_bundle_is_refused(data: bytes) -> None:
    with pytest.raises(WitnessBundleError):
        decode_bundle(data, 10)


def test_entries_of_the_wrong_length_are_refused() -> None:
    with pytest.raises(WitnessBundleError):
        encode_bundle({0: (b"short", bytes(SIG_BYTES))})
