"""Node keys on disk: an eth-account encrypted keystore and an ed25519 node key seed.

Both files are created with mode 0600 and written atomically; existing keys are never
overwritten, so a second `keys new` cannot destroy an identity that holds stake.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from eth_account import Account
from eth_account.signers.local import LocalAccount

from protocol.config.atomic import atomic_write
from protocol.core.crypto.signing import NodeIdentity
from protocol.core.errors import ConfigError

KEYSTORE_FILE = "keystore.json"
NODE_KEY_FILE = "node_key"
KDF_ITERATIONS = 262_144  # eth-account's default scrypt/pbkdf2 work factor


@dataclass(frozen=True)
class NodeKeys:
    account: LocalAccount
    identity: NodeIdentity
    bls: int | None = None  # the BLS12-381 secret validators sign results with


def new_keys(directory: Path, password: str, kdf_iterations: int = KDF_ITERATIONS,
             account_key: bytes | None = None) -> tuple[str, bytes]:
    """Create the account keystore (of a new account, or of `account_key`'s), the node key and the
    BLS keystore (validators sign round results with it) in `directory`; returns (account
    address, node public key)."""
    from protocol.node.bls_keystore import (  # it builds on this module
        BLS_KEYSTORE_FILE,
        new_bls_key,
    )

    directory = Path(directory)
    if not password:
        raise ConfigError("refusing to write a keystore with an empty password")
    for name in (KEYSTORE_FILE, NODE_KEY_FILE, BLS_KEYSTORE_FILE):
        if (directory / name).exists():
            raise ConfigError(f"{directory / name} already exists; refusing to overwrite a key")
    directory.mkdir(parents=True, exist_ok=True)
    account = Account.create() if account_key is None else Account.from_key(account_key)
    identity = NodeIdentity.generate()
    keystore = Account.encrypt(account.key, password, iterations=kdf_iterations)
    _write_private(directory / NODE_KEY_FILE, identity.seed.hex() + "\n")
    _write_private(directory / KEYSTORE_FILE, json.dumps(keystore))
    new_bls_key(directory, password, kdf_iterations)
    return account.address, identity.public_key


def load_keys(directory: Path, password: str) -> NodeKeys:
    """Decrypt the keystore and read the node key; typed errors say which file is wrong."""
    directory = Path(directory)
    keystore_path, node_key_path = directory / KEYSTORE_FILE, directory / NODE_KEY_FILE
    try:
        seed_hex = node_key_path.read_text().strip()
    except FileNotFoundError as exc:
        raise ConfigError(f"{exc.filename} not found; create keys with `veritrain keys new --out {directory}`") from exc
    account = load_keystore(keystore_path, password, hint=f"create keys with `veritrain keys new --out {directory}`")
    try:
        identity = NodeIdentity(bytes.fromhex(seed_hex))
    except ValueError as exc:
        raise ConfigError(f"{node_key_path} does not hold a 32-byte hex ed25519 seed") from exc
    from protocol.node.bls_keystore import (  # it builds on this module
        BLS_KEYSTORE_FILE,
        load_bls_key,
    )

    bls = load_bls_key(directory, password) if (directory / BLS_KEYSTORE_FILE).exists() else None
    return NodeKeys(account, identity, bls)


def load_keystore(path: Path, password: str, hint: str | None = None) -> LocalAccount:
    """Decrypt an eth-account keystore file (a node's, or a deployer's `--key`); every
    failure is a ConfigError that names the file."""
    secret = decrypt_secret(path, password, hint)
    try:
        return Account.from_key(secret)
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"cannot decrypt {path}: wrong password or corrupt keystore") from exc


def encrypt_secret(secret: bytes, password: str, kdf_iterations: int = KDF_ITERATIONS) -> dict:
    """A v3 keystore (scrypt) of a 32-byte secret that is not an account key (a BLS secret):
    eth-account's format, less the address it would derive from the secret as if it were one."""
    if not password:
        raise ConfigError("refusing to write a keystore with an empty password")
    keystore = dict(Account.encrypt(secret, password, kdf="scrypt", iterations=kdf_iterations))
    keystore.pop("address", None)
    return keystore


def decrypt_secret(path: Path, password: str, hint: str | None = None) -> bytes:
    """The secret in keystore file `path`; every failure is a ConfigError that names the file."""
    path = Path(path)
    try:
        keystore = json.loads(path.read_text())
    except FileNotFoundError as exc:
        raise ConfigError(f"{path} not found" + (f"; {hint}" if hint else "")) from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path} is not a JSON keystore") from exc
    try:
        return bytes(Account.decrypt(keystore, password))
    except (ValueError, TypeError, KeyError) as exc:
        raise ConfigError(f"cannot decrypt {path}: wrong password or corrupt keystore") from exc


def keystore_address(directory: Path) -> str:
    """The account address, readable without the password."""
    try:
        return "0x" + json.loads((Path(directory) / KEYSTORE_FILE).read_text())["address"].removeprefix("0x")
    except (FileNotFoundError, KeyError, json.JSONDecodeError) as exc:
        raise ConfigError(f"no readable keystore in {directory}") from exc


def _write_private(path: Path, text: str) -> None:
    atomic_write(path, text.encode(), mode=0o600, prefix=".key-")
