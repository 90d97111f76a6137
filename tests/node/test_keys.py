"""Keys on disk: 0600 files, round trip, no overwrite, typed errors."""

from __future__ import annotations

import stat

import pytest

from protocol.core.errors import ConfigError
from protocol.node.keys import KEYSTORE_FILE, NODE_KEY_FILE, keystore_address, load_keys, new_keys


def test_new_keys_round_trip_with_private_permissions(tmp_path):
    address, node_key = new_keys(tmp_path / "k", "pw", kdf_iterations=2)
    for name in (KEYSTORE_FILE, NODE_KEY_FILE):
        assert stat.S_IMODE((tmp_path / "k" / name).stat().st_mode) == 0o600
    keys = load_keys(tmp_path / "k", "pw")
    assert keys.account.address == address
    assert keys.identity.public_key == node_key
    assert keystore_address(tmp_path / "k").lower() == address.lower()


def test_refuses_to_overwrite(tmp_path):
    new_keys(tmp_path, "pw", kdf_iterations=2)
    before = (tmp_path / NODE_KEY_FILE).read_text()
    with pytest.raises(ConfigError, match="already exists"):
        new_keys(tmp_path, "pw", kdf_iterations=2)
    assert (tmp_path / NODE_KEY_FILE).read_text() == before


def test_wrong_password_and_missing_files(tmp_path):
    new_keys(tmp_path, "pw", kdf_iterations=2)
    with pytest.raises(ConfigError, match="wrong password"):
        load_keys(tmp_path, "nope")
    with pytest.raises(ConfigError, match="not found"):
        load_keys(tmp_path / "elsewhere", "pw")
    (tmp_path / NODE_KEY_FILE).write_text("zz")
    with pytest.raises(ConfigError, match="32-byte"):
        load_keys(tmp_path, "pw")


def test_empty_password_rejected(tmp_path):
    with pytest.raises(ConfigError, match="empty password"):
        new_keys(tmp_path, "")
    assert not (tmp_path / KEYSTORE_FILE).exists()
