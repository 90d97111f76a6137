"""The blob a stage miner commits (docs/PROTOCOL.md §16.4): a strict header that binds it to the
chain, the rounds contract, the round, the committing miner and its seat, its stage trace, and the
stage's update (its pseudo-gradient alone, compressed over the stage's flat values as
`staged_aggregate` reads it).

Its content hash is the `update_hash` committed on chain and `stage_trace_root` of the trace its
`trace_root`, so a copied commitment opens to a blob that names someone else, as for a whole-model
submission (`proof/envelope.py`, whose binding check this reuses).

Layout: magic (8 bytes) ‖ header length (u32, big-endian) ‖ header JSON ‖ update bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from protocol.core.crypto.hashing import Digest
from protocol.core.pipeline.stage_slots import StageSeat
from protocol.core.pipeline.stage_split import MAX_STAGES
from protocol.core.pipeline.stage_trace import StageTrace
from protocol.core.proof.envelope import EnvelopeError, check_header_binding, frame, unframe
from protocol.core.proof.envelope_header import Address, Hex32

MAGIC = b"VTSTGv1\x00"


class StageEnvelopeHeader(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)
    schema_version: Literal[1] = 1
    chain_id: int = Field(ge=0, lt=2**63)
    contract: Address  # the rounds contract
    round: int = Field(ge=0, lt=2**63)
    miner: Address
    pipeline: int = Field(ge=0, lt=2**32)
    stage: int = Field(ge=0, lt=MAX_STAGES)
    stages: int = Field(ge=2, le=MAX_STAGES)
    checkpoint_hashes: list[Hex32] = Field(max_length=1 << 16)
    boundary_roots: list[Hex32] = Field(max_length=1 << 16)
    update_size: int = Field(ge=0, lt=2**40)


@dataclass(frozen=True)
class StageEnvelope:
    header: StageEnvelopeHeader
    update: bytes

    @property
    def seat(self) -> StageSeat:
        h = self.header
        return StageSeat(h.round, h.pipeline, h.stage, h.stages)

    @property
    def trace(self) -> StageTrace:
        h = self.header
        return StageTrace(tuple(Digest(bytes.fromhex(x)) for x in h.checkpoint_hashes),
                          tuple(Digest(bytes.fromhex(x)) for x in h.boundary_roots))


def encode_stage_envelope(chain_id: int, contract: str, miner: str, seat: StageSeat, trace: StageTrace,
                          update: bytes) -> bytes:
    header = StageEnvelopeHeader(
        chain_id=chain_id, contract=contract, round=seat.round, miner=miner, pipeline=seat.pipeline,
        stage=seat.stage, stages=seat.stages, checkpoint_hashes=[h.hex() for h in trace.checkpoint_hashes],
        boundary_roots=[h.hex() for h in trace.boundary_roots], update_size=len(update))
    return frame(MAGIC, header.model_dump_json().encode(), update)


def decode_stage_envelope(data: bytes, max_bytes: int) -> StageEnvelope:
    """Parse untrusted bytes; every failure is an EnvelopeError."""
    header_json, update = unframe(data, MAGIC, max_bytes, "stage submission")
    try:
        header = StageEnvelopeHeader.model_validate_json(header_json)
    except ValidationError as exc:
        raise EnvelopeError(f"stage submission header invalid: {exc.errors()[0]['msg']}") from exc
    if header.stage >= header.stages:
        raise EnvelopeError(f"stage {header.stage} of a {header.stages}-stage pipeline")
    if len(update) != header.update_size:
        raise EnvelopeError("stage submission update size does not match its header")
    return StageEnvelope(header, update)


def check_stage_binding(env: StageEnvelope, chain_id: int, contract: str, round_: int, miner: str) -> None:
    """The stage submission must name this chain, contract, round and committing miner."""
    check_header_binding(env.header, chain_id, contract, round_, miner, "stage submission")
