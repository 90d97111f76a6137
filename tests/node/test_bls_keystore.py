"""The BLS keystore: 0600 file beside keystore.json, round trip, no overwrite, typed errors."""

from __future__ import annotations

import stat

import pytest

from protocol.core.crypto.bls import bls_public_key
from protocol.core.errors import ConfigError
from protocol.node.bls_keystore import (
    BLS_KEYSTORE_FILE,
    bls_keystore_public_key,
    load_bls_key,
    new_bls_key,
)
from protocol.node.keys import KEYSTORE_FILE, load_keys, new_keys


def test_round_trip_beside_the_account_keystore(tmp_path):
    new_keys(tmp_path, "pw", kdf_iterations=2)  # writes the BLS keystore too
    public_key = bls_keystore_public_key(tmp_path)
    assert (tmp_path / KEYSTORE_FILE).exists()
    assert load_keys(tmp_path, "pw").bls == load_bls_key(tmp_path, "pw")
    assert stat.S_IMODE((tmp_path / BLS_KEYSTORE_FILE).stat().st_mode) == 0o600
    assert bls_public_key(load_bls_key(tmp_path, "pw")) == public_key
    assert bls_keystore_public_key(tmp_path) == public_key
    assert "address" not in (tmp_path / BLS_KEYSTORE_FILE).read_text()  # not an account key


def test_wrong_password_missing_file_and_no_overwrite(tmp_path):
    new_bls_key(tmp_path, "pw", kdf_iterations=2)
    before = (tmp_path / BLS_KEYSTORE_FILE).read_text()
    with pytest.raises(ConfigError, match="wrong password"):
        load_bls_key(tmp_path, "nope")
    with pytest.raises(ConfigError, match="already exists"):
        new_bls_key(tmp_path, "pw", kdf_iterations=2)
    assert (tmp_path / BLS_KEYSTORE_FILE).read_text() == before
    with pytest.raises(ConfigError, match="not found"):
        load_bls_key(tmp_path / "elsewhere", "pw")
    with pytest.raises(ConfigError, match="empty password"):
        new_bls_key(tmp_path / "other", "")
