"""`veritrain keys new --account-key FILE`: the keystore of an account the operator already holds,
and a clear error, naming the file but never its content, before anything is written."""

from __future__ import annotations

from eth_account import Account

from tests.conftest import run_cli

ENV = {"VERITRAIN_PASSWORD": "pw"}
KEY = "4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318"


def test_the_keystore_holds_the_given_account(tmp_path) -> None:
    key_file = tmp_path / "account.key"
    key_file.write_text("0x" + KEY + "\n")
    made = run_cli("keys", "new", "--out", str(tmp_path / "keys"), "--account-key", str(key_file), env=ENV)
    assert made.code == 0, made.stderr
    expected = Account.from_key(bytes.fromhex(KEY)).address
    assert f"account  {expected}" in made.stdout
    assert run_cli("keys", "show", "--keys", str(tmp_path / "keys")).stdout.strip().lower() == expected.lower()
    assert KEY not in made.stdout + made.stderr


def test_a_file_without_a_key_is_refused_before_anything_is_written(tmp_path) -> None:
    key_file = tmp_path / "account.key"
    key_file.write_text(KEY[:-2] + "zz\n")
    made = run_cli("keys", "new", "--out", str(tmp_path / "keys"), "--account-key", str(key_file), env=ENV)
    assert made.code != 0
    assert "does not hold a private key" in made.stderr and KEY[:20] not in made.stderr
    assert not (tmp_path / "keys").exists()
