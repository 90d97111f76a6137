"""The signed claim inside a `partial_announced` gossip message: "node (L, i) of round r's
aggregation tree has the partial sum with this hash", signed by the validator's node key.

The gossip signature covers a JSON payload with a nonce, which a contract or a voter reading an
`aggregate` report from chain cannot rebuild; this claim is fixed-width bytes that anyone rebuilds
from the report's fields, so the 64-byte signature alone, carried on chain as the report's
`challenge_sig`, is the evidence (PROTOCOL.md §12, §13.9).

    message = b"veritrain/partial/v1\\n" ‖ chain_id (32) ‖ staking contract (20) ‖ round (32)
              ‖ level (32) ‖ index (32) ‖ partial_hash (32)          (integers big-endian)
"""

from __future__ import annotations

from protocol.core.crypto.signing import NodeIdentity, verify

PARTIAL_DOMAIN = b"veritrain/partial/v1\n"


def partial_message(chain_id: int, contract: bytes, round_: int, level: int, index: int, partial_hash: bytes) -> bytes:
    if len(contract) != 20 or len(partial_hash) != 32:
        raise ValueError("a partial claim names a 20-byte contract and a 32-byte hash")
    return (PARTIAL_DOMAIN + chain_id.to_bytes(32, "big") + contract + round_.to_bytes(32, "big")
            + level.to_bytes(32, "big") + index.to_bytes(32, "big") + partial_hash)


def sign_partial(identity: NodeIdentity, chain_id: int, contract: bytes, round_: int, level: int, index: int,
                 partial_hash: bytes) -> bytes:
    return identity.sign(partial_message(chain_id, contract, round_, level, index, partial_hash))


def verify_partial(node_key: bytes, signature: bytes, chain_id: int, contract: bytes, round_: int, level: int,
                   index: int, partial_hash: bytes) -> None:
    """Raise SignatureError unless `signature` is `node_key`'s claim of this node's hash."""
    verify(node_key, partial_message(chain_id, contract, round_, level, index, partial_hash), signature)
