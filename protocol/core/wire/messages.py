"""Wire messages gossiped between nodes: strict pydantic v2 models plus their signed encoding.

Wire format of one gossip message (the libp2p pubsub `data` field):

    signature (64 bytes, ed25519) || payload (UTF-8 JSON of `GossipPayload`)

The signature covers `GOSSIP_SIGN_DOMAIN || payload`, i.e. the exact bytes sent, so a peer on
another libp2p implementation never has to re-canonicalise JSON. The payload itself carries the
domain, chain id, contract, round and a random nonce, so a signature cannot be replayed in
another deployment or round. This module imports no network code (see protocol/p2p).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Annotated, Literal

import pydantic
from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from protocol.core.crypto.signing import NodeIdentity, verify
from protocol.core.errors import SignatureError, VeritrainError
from protocol.core.settlement.fraud import FraudKind

SCHEMA_VERSION = 1
GOSSIP_DOMAIN = "veritrain/gossip/v1"
GOSSIP_SIGN_DOMAIN = b"veritrain/gossip/v1\n"
SIGNATURE_LEN = 64
MAX_GOSSIP_BYTES = 4096  # whole message cap; an announcement is ~600 bytes
MAX_MULTIADDR_LEN = 256


class MessageError(VeritrainError):
    """Base of errors about gossip message bytes."""


class MalformedMessage(MessageError):
    """Raised when message bytes do not parse strictly: bad JSON, unknown or missing fields,
    wrong types, over the size cap, or a wrong schema version."""


class MessageRejected(MessageError):
    """Raised when a well-formed message breaks a rule: bad signature, unregistered sender,
    wrong deployment or round, replayed nonce, or a sender other than the claimed node."""


Hex32 = Annotated[str, StringConstraints(pattern=r"^0x[0-9a-f]{64}$")]
Nonce = Annotated[str, StringConstraints(pattern=r"^0x[0-9a-f]{32}$")]
Address = Annotated[str, StringConstraints(pattern=r"^0x[0-9a-f]{40}$")]
SigHex = Annotated[str, StringConstraints(pattern=r"^0x[0-9a-f]{128}$")]
BlsSigHex = Annotated[str, StringConstraints(pattern=r"^0x[0-9a-f]{192}$")]
Round = Annotated[int, Field(ge=0, lt=2**63)]


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)


class UpdateAnnounced(_Strict):
    """A miner committed an update on chain and now serves its blob at `multiaddr`."""

    kind: Literal["update_announced"] = "update_announced"
    miner: Address
    update_hash: Hex32  # blake3 content hash of the update blob, as committed on chain
    trace_root: Hex32
    size: int = Field(ge=0, lt=2**40)
    multiaddr: str = Field(min_length=1, max_length=MAX_MULTIADDR_LEN)


class ResultSigned(_Strict):
    """A validator's BLS signature (its share of the certificate) of a round's result root."""

    kind: Literal["result_signed"] = "result_signed"
    validator: Address
    result_root: Hex32
    model_hash: Hex32  # the next model the result names, so peers can fetch it early
    signature: BlsSigHex  # 96-byte compressed G2 point (py-ecc / ZCash encoding)


# on the wire as the kind's lowercase name (replay | derivation | unavailable)
ReportKind = Annotated[FraudKind, pydantic.BeforeValidator(FraudKind.from_label),
                       pydantic.PlainSerializer(lambda k: k.label, return_type=str)]


class FraudReported(_Strict):
    """A validator filed a fraud or unavailability report and serves the evidence."""

    kind: Literal["fraud_reported"] = "fraud_reported"
    reporter: Address
    miner: Address
    report_kind: ReportKind
    segment: int | None = Field(default=None, ge=0, lt=2**32)
    expected_hash: Hex32 | None = None
    got_hash: Hex32 | None = None
    sigma: SigHex  # the challenge-seed signature, so voters can re-derive the seed


class PartialAnnounced(_Strict):
    """A validator drawn for a node of the round's aggregation tree (PROTOCOL.md §13.9) computed
    its partial sum and serves it by this hash. Signed by its node key, so two validators'
    differing hashes for one node are evidence: whoever recomputes it knows who lied."""

    kind: Literal["partial_announced"] = "partial_announced"
    validator: Address
    level: int = Field(ge=1, lt=64)  # 1 .. the tree's depth
    index: int = Field(ge=0, lt=2**14)  # within its level; a level has fewer nodes than MAX_MINERS
    partial_hash: Hex32  # blake3 content hash of the encoded partial sum
    claim_sig: SigHex  # the node key's signature of the fixed-width claim (partial_claim.py): on-chain evidence


class TreeAudited(_Strict):
    """A validator of the round's aggregation tree finished its audits (PROTOCOL.md §13.9), having
    gossiped `dissents` claims of nodes it does not serve. The others wait for it, and for that
    many of its claims, before computing θ_{r+1}: a slow auditor's dissent still counts."""

    kind: Literal["tree_audited"] = "tree_audited"
    validator: Address
    dissents: int = Field(ge=0, lt=2**14)


Body = Annotated[UpdateAnnounced | ResultSigned | FraudReported | PartialAnnounced | TreeAudited,
                 Field(discriminator="kind")]


class GossipPayload(_Strict):
    """The signed part of a gossip message."""

    schema_version: Literal[1] = 1
    domain: Literal["veritrain/gossip/v1"] = "veritrain/gossip/v1"
    chain_id: int = Field(ge=0, lt=2**63)
    contract: Address
    round: Round
    nonce: Nonce
    sender: Hex32  # the signer's ed25519 node key (also its libp2p identity)
    body: Body


class BlobRequest(_Strict):
    """Blob protocol request: the blob whose blake3 content hash is `hash`."""

    schema_version: Literal[1] = 1
    kind: Literal["blob"] = "blob"
    hash: Hex32


PartName = Literal["all", "params", "ef", "hashes"]  # protocol.core.checkpoint.parts.CheckpointPart


class CheckpointRequest(_Strict):
    """Blob protocol request: checkpoint `index` of the trace with root `trace_root`."""

    schema_version: Literal[1] = 1
    kind: Literal["checkpoint"] = "checkpoint"
    round: Round
    trace_root: Hex32
    index: int = Field(ge=0, lt=2**32)
    # which tensors to ship with the digest list (docs/INTEROP.md §6); absent: all of them
    part: PartName = "all"


class StageSegmentRequest(_Strict):
    """Blob protocol request: what is served for segment `segment` of the stage whose stage trace
    root is `trace_root` (PROTOCOL.md §16.5). No content hash: the bundle is checked against the
    trace root by its replay, so the stage or the sender of its tensors may serve it."""

    schema_version: Literal[1] = 1
    kind: Literal["stage_segment"] = "stage_segment"
    round: Round
    trace_root: Hex32  # the stage's own trace root (stage_trace.stage_trace_root)
    segment: int = Field(ge=0, lt=2**32)


# every request of the blob protocol (docs/INTEROP.md §5), told apart by `kind`
BlobProtocolRequest = BlobRequest | CheckpointRequest | StageSegmentRequest
BlobRequestAny = Annotated[BlobProtocolRequest, Field(discriminator="kind")]
REQUEST_ADAPTER: pydantic.TypeAdapter[BlobProtocolRequest] = pydantic.TypeAdapter(BlobRequestAny)


@dataclass(frozen=True)
class SignedGossip:
    """A decoded message whose signature verified against `payload.sender`."""

    payload: GossipPayload
    signature: bytes
    data: bytes  # the exact wire bytes

    @property
    def sender_key(self) -> bytes:
        return bytes.fromhex(self.payload.sender[2:])


def to_hex(raw: bytes) -> str:
    return "0x" + raw.hex()


def from_hex(text: str) -> bytes:
    return bytes.fromhex(text[2:])


def new_nonce() -> str:
    return to_hex(os.urandom(16))


def encode_gossip(identity: NodeIdentity, payload: GossipPayload) -> bytes:
    """Sign `payload` with `identity` and return the wire bytes."""
    if payload.sender != to_hex(identity.public_key):
        raise SignatureError("payload.sender must be the signing identity's node key")
    body = payload.model_dump_json().encode()
    data = identity.sign(GOSSIP_SIGN_DOMAIN + body) + body
    if len(data) > MAX_GOSSIP_BYTES:
        raise MalformedMessage(f"message is {len(data)} bytes, cap is {MAX_GOSSIP_BYTES}")
    return data


def make_gossip(
    identity: NodeIdentity, chain_id: int, contract: bytes, round_: int, body: Body
) -> bytes:
    """Build, sign and encode one message with a fresh nonce."""
    payload = GossipPayload(
        chain_id=chain_id,
        contract=to_hex(contract),
        round=round_,
        nonce=new_nonce(),
        sender=to_hex(identity.public_key),
        body=body,
    )
    return encode_gossip(identity, payload)


def decode_gossip(data: bytes) -> SignedGossip:
    """Parse strictly and verify the signature against the claimed sender key.

    Raises MalformedMessage for bytes that do not parse, MessageRejected for a bad signature.
    Deployment, round, registry and replay rules are the caller's (protocol.p2p.gossip).
    """
    if len(data) > MAX_GOSSIP_BYTES:
        raise MalformedMessage(f"message is {len(data)} bytes, cap is {MAX_GOSSIP_BYTES}")
    if len(data) <= SIGNATURE_LEN:
        raise MalformedMessage("message shorter than its signature")
    signature, body = data[:SIGNATURE_LEN], data[SIGNATURE_LEN:]
    try:
        payload = GossipPayload.model_validate_json(body)
    except pydantic.ValidationError as exc:
        raise MalformedMessage(f"payload does not parse: {exc.error_count()} errors") from exc
    try:
        verify(from_hex(payload.sender), GOSSIP_SIGN_DOMAIN + body, signature)
    except SignatureError as exc:
        raise MessageRejected("signature does not verify against the claimed sender") from exc
    return SignedGossip(payload=payload, signature=signature, data=data)
