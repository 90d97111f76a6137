"""The submission envelope's magic and strict JSON header (envelope.py has the codec), torch-free:
the blob caps (protocol/core/wire/blob_caps.py) size the longest header a run allows from it.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

MAGIC = b"VTSUBv1\x00"
MAX_HEADER_BYTES = 1 << 20  # 1 MiB: H <= ~20k steps of losses
Hex32 = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]
Address = Annotated[str, StringConstraints(pattern=r"^0x[0-9a-fA-F]{40}$")]


class EnvelopeHeader(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)
    schema_version: Literal[2] = 2
    chain_id: int = Field(ge=0, lt=2**63)
    contract: Address  # the rounds contract (where the update is committed)
    round: int = Field(ge=0, lt=2**63)
    miner: Address
    checkpoint_hashes: list[Hex32] = Field(max_length=1 << 16)
    losses: list[float] = Field(max_length=1 << 20)
    carry_hash: Hex32  # training.Carry into the next round (proof.carry_hash)
    update_size: int = Field(ge=0, lt=2**40)
