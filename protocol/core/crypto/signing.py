"""ed25519 node identity: keys, deterministic signatures over canonical bytes.

The same 32-byte seed gives the node's libp2p peer id (see protocol/p2p). Every signed
payload starts with a domain tag so a signature can never be replayed in another context.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NewType

import nacl.exceptions
import nacl.signing

from protocol.core.errors import SignatureError

NodeKey = NewType("NodeKey", bytes)  # 32-byte ed25519 public key

BINDING_DOMAIN = b"veritrain/binding/v1"


@dataclass(frozen=True)
class NodeIdentity:
    """An ed25519 key pair derived from a 32-byte seed."""

    seed: bytes

    def __post_init__(self) -> None:
        if len(self.seed) != 32:
            raise SignatureError(f"node key seed must be 32 bytes, got {len(self.seed)}")

    @property
    def _signing_key(self) -> nacl.signing.SigningKey:
        return nacl.signing.SigningKey(self.seed)

    @property
    def public_key(self) -> NodeKey:
        return NodeKey(bytes(self._signing_key.verify_key))

    def sign(self, message: bytes) -> bytes:
        """Deterministic 64-byte ed25519 signature (RFC 8032)."""
        return self._signing_key.sign(message).signature

    @classmethod
    def generate(cls) -> NodeIdentity:
        return cls(bytes(nacl.signing.SigningKey.generate()))


def verify(public_key: bytes, message: bytes, signature: bytes) -> None:
    """Raise SignatureError unless `signature` is a valid signature of `message`."""
    if len(public_key) != 32 or len(signature) != 64:
        raise SignatureError("malformed ed25519 key or signature length")
    try:
        nacl.signing.VerifyKey(public_key).verify(message, signature)
    except (nacl.exceptions.BadSignatureError, nacl.exceptions.ValueError) as exc:
        raise SignatureError("ed25519 signature does not verify") from exc


def is_valid(public_key: bytes, message: bytes, signature: bytes) -> bool:
    try:
        verify(public_key, message, signature)
    except SignatureError:
        return False
    return True


def binding_message(chain_id: int, contract: bytes, account: bytes) -> bytes:
    """Bytes a node key signs to bind itself to an Ethereum account on one deployment."""
    if len(contract) != 20 or len(account) != 20:
        raise SignatureError("contract and account must be 20-byte addresses")
    return BINDING_DOMAIN + chain_id.to_bytes(32, "big") + contract + account
