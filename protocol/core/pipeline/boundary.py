"""Boundary commitments between pipeline stages (issue 32): what the sender of a tensor signs, the
per-segment root a stage commits over what it sent and received, and equivocation evidence.

Every tensor that crosses a boundary has one **slot**: (round, pipeline, stage, step, microbatch,
direction), `stage` the sender's, `direction` FORWARD (activations to stage + 1) or BACKWARD
(input gradients to stage - 1). The sender signs, with its node key, the fixed-width message

    b"veritrain/boundary/v1\\n" ‖ chain_id (32) ‖ staking contract (20) ‖ round (32) ‖ pipeline (32)
    ‖ stage (32) ‖ step (32) ‖ microbatch (32) ‖ direction (1) ‖ tensor hash (32)

(integers big-endian; the hash is `gpipe.tensor_hash`), and the receiver keeps the signature.
Two valid signatures by one key of different hashes for one slot are **equivocation**: evidence
that the signer sent two tensors where one was due. A stage's trace commits, per replay segment, to
the Merkle root (`hashing.merkle_root`) over its slots' leaves, received and sent, in slot order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum

from protocol.core.crypto.hashing import Digest, merkle_root
from protocol.core.crypto.signing import NodeIdentity, verify
from protocol.core.errors import SignatureError, VeritrainError

DOMAIN = b"veritrain/boundary/v1\n"


class Direction(IntEnum):
    FORWARD = 0  # activations, stage -> stage + 1
    BACKWARD = 1  # input gradients, stage -> stage - 1


class NotEquivocation(VeritrainError):
    """Raised when two signed boundary hashes are not evidence of equivocation."""


@dataclass(frozen=True, order=True)
class Slot:
    round: int
    pipeline: int
    stage: int  # the sender's
    step: int  # 1-based, within the round
    microbatch: int
    direction: Direction

    def key(self) -> bytes:
        return (b"".join(v.to_bytes(32, "big") for v in (self.round, self.pipeline, self.stage, self.step,
                                                           self.microbatch)) + bytes([self.direction]))


def boundary_message(chain_id: int, contract: bytes, slot: Slot, tensor_hash: bytes) -> bytes:
    if len(contract) != 20 or len(tensor_hash) != 32:
        raise ValueError("a boundary claim names a 20-byte contract and a 32-byte hash")
    return DOMAIN + chain_id.to_bytes(32, "big") + contract + slot.key() + tensor_hash


def sign_boundary(identity: NodeIdentity, chain_id: int, contract: bytes, slot: Slot, tensor_hash: bytes) -> bytes:
    return identity.sign(boundary_message(chain_id, contract, slot, tensor_hash))


def verify_boundary(node_key: bytes, signature: bytes, chain_id: int, contract: bytes, slot: Slot,
                    tensor_hash: bytes) -> None:
    """Raise SignatureError unless `signature` is `node_key`'s claim that `slot` carried `tensor_hash`."""
    verify(node_key, boundary_message(chain_id, contract, slot, tensor_hash), signature)


@dataclass(frozen=True)
class Signed:
    tensor_hash: bytes
    signature: bytes


def check_equivocation(node_key: bytes, chain_id: int, contract: bytes, slot: Slot, a: Signed, b: Signed) -> None:
    """Raise NotEquivocation unless `a` and `b` are two different hashes `node_key` signed for `slot`."""
    if a.tensor_hash == b.tensor_hash:
        raise NotEquivocation("the two claims name the same tensor")
    for claim in (a, b):
        try:
            verify_boundary(node_key, claim.signature, chain_id, contract, slot, claim.tensor_hash)
        except SignatureError as exc:
            raise NotEquivocation(f"a claim is not the accused's signature for this slot: {exc}") from exc


def segment_root(slots: Sequence[tuple[Slot, bytes]]) -> Digest:
    """A stage's commitment over one segment's boundary tensors, received and sent: the Merkle root
    over slot key ‖ tensor hash, in slot order (whatever order they are given in)."""
    return merkle_root([slot.key() + h for slot, h in sorted(slots)])
