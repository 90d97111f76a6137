"""A validator's BLS12-381 secret on disk: `bls_keystore.json` beside `keystore.json`.

The secret is encrypted like the account key (a v3 scrypt keystore, via protocol.node.keys,
the one home of eth-account), written atomically with mode 0600 and never overwritten: the
key registered in BlsKeys can never change, so losing it would silence the validator.
"""

from __future__ import annotations

import json
import secrets
from pathlib import Path

from protocol.config.atomic import atomic_write
from protocol.core.crypto.bls import PUBLIC_KEY_BYTES, BlsSecret, bls_keygen, bls_public_key
from protocol.core.errors import BlsError, ConfigError
from protocol.node.keys import KDF_ITERATIONS, decrypt_secret, encrypt_secret

BLS_KEYSTORE_FILE = "bls_keystore.json"


def new_bls_key(directory: Path, password: str, kdf_iterations: int = KDF_ITERATIONS) -> bytes:
    """Create a BLS secret in `directory`; returns its 48-byte compressed public key."""
    path = Path(directory) / BLS_KEYSTORE_FILE
    if path.exists():
        raise ConfigError(f"{path} already exists; refusing to overwrite a key")
    sk = bls_keygen(secrets.token_bytes(32))
    public_key = bls_public_key(sk)
    keystore = encrypt_secret(sk.to_bytes(32, "big"), password, kdf_iterations)
    keystore["pubkey"] = public_key.hex()  # readable without the password, like `address`
    atomic_write(path, json.dumps(keystore).encode(), mode=0o600, prefix=".key-")
    return public_key


def load_bls_key(directory: Path, password: str) -> BlsSecret:
    """Decrypt the BLS secret in `directory`; a ConfigError names the file on any failure."""
    path = Path(directory) / BLS_KEYSTORE_FILE
    secret = decrypt_secret(path, password)
    sk = int.from_bytes(secret, "big")
    try:
        bls_public_key(sk)  # the secret is a valid scalar
    except BlsError as exc:
        raise ConfigError(f"{path} does not hold a BLS secret") from exc
    return BlsSecret(sk)


def bls_keystore_public_key(directory: Path) -> bytes:
    """The compressed public key recorded beside the secret, readable without the password."""
    path = Path(directory) / BLS_KEYSTORE_FILE
    try:
        public_key = bytes.fromhex(json.loads(path.read_text())["pubkey"])
    except (FileNotFoundError, KeyError, ValueError) as exc:
        raise ConfigError(f"no readable BLS keystore in {directory}") from exc
    if len(public_key) != PUBLIC_KEY_BYTES:
        raise ConfigError(f"{path} records a {len(public_key)}-byte public key")
    return public_key
