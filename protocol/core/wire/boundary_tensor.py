"""The header of a boundary tensor on the stage link (`/veritrain/stage/1.0.0`, docs/INTEROP.md §5a):
one activation or output gradient crossing between pipeline stages (DESIGN.md §8.4).

    frame := u32 len (<= MAX_HEADER_BYTES) || JSON BoundaryHeader || float32 little-endian bytes

The bytes are the tensor row-major, `4 * prod(shape)` of them; `tensor_hash` is their blake3
(`boundary_hash`, the same digest as `gpipe.tensor_hash` of the tensor) and `signature` the
sender's node-key signature of it for the slot (`boundary.sign_boundary`). Torch-free: the p2p
layer reads and checks these without loading torch.
"""

from __future__ import annotations

import math
import struct
from typing import TYPE_CHECKING, Annotated, Literal

import pydantic
from pydantic import Field

from protocol.core.crypto.hashing import Digest, blake3_hash
from protocol.core.pipeline.boundary import Direction, Signed, Slot
from protocol.core.wire.messages import (
    Hex32,
    MalformedMessage,
    Round,
    SigHex,
    _Strict,
    from_hex,
    to_hex,
)

if TYPE_CHECKING:
    from protocol.core.model.config import ModelConfig

MAX_HEADER_BYTES = 1024  # a header is ~390 bytes of JSON
FLOAT32_BYTES = 4
MAX_DIMS = 8  # boundary tensors are (rows, T, C); room for other layouts, not for abuse
HASH_DOMAIN = "boundary-tensor"  # gpipe.tensor_hash's domain: both must name the same digest
DirectionName = Literal["forward", "backward"]
Dim = Annotated[int, Field(ge=1, lt=2**31)]


class BoundaryHeader(_Strict):
    """What precedes a boundary tensor's bytes: its slot, shape, dtype, hash and signature."""

    schema_version: Literal[1] = 1
    kind: Literal["boundary_tensor"] = "boundary_tensor"
    round: Round
    pipeline: int = Field(ge=0, lt=2**32)
    stage: int = Field(ge=0, lt=2**16)  # the sender's
    step: int = Field(ge=1, lt=2**32)  # 1-based, within the round
    microbatch: int = Field(ge=0, lt=2**32)
    direction: DirectionName
    shape: tuple[Dim, ...] = Field(min_length=1, max_length=MAX_DIMS)
    dtype: Literal["float32"] = "float32"  # the only dtype: what gpipe hashes and stages exchange
    tensor_hash: Hex32
    signature: SigHex

    @property
    def slot(self) -> Slot:
        return Slot(self.round, self.pipeline, self.stage, self.step, self.microbatch,
                    Direction[self.direction.upper()])

    @property
    def nbytes(self) -> int:
        return tensor_nbytes(self.shape)

    @property
    def signed(self) -> Signed:
        return Signed(from_hex(self.tensor_hash), from_hex(self.signature))


def tensor_nbytes(shape: tuple[int, ...]) -> int:
    return FLOAT32_BYTES * math.prod(shape)


def boundary_shape(model: ModelConfig, rows: int) -> tuple[int, int, int]:
    """One microbatch's activation (and output gradient): (rows, block_size, n_embd), float32;
    its byte count, rows x block_size x n_embd x 4, is the link's cap."""
    return (rows, model.block_size, model.n_embd)


def boundary_hash(data: bytes | memoryview) -> Digest:
    """blake3 of a boundary tensor's float32 bytes: equal to `gpipe.tensor_hash` of the tensor."""
    return blake3_hash(HASH_DOMAIN, data)


def header_for(slot: Slot, shape: tuple[int, ...], tensor_hash: bytes, signature: bytes) -> BoundaryHeader:
    return BoundaryHeader(round=slot.round, pipeline=slot.pipeline, stage=slot.stage, step=slot.step,
                          microbatch=slot.microbatch, direction=slot.direction.name.lower(),  # type: ignore[arg-type]
                          shape=tuple(shape), tensor_hash=to_hex(tensor_hash), signature=to_hex(signature))


def encode_header(header: BoundaryHeader) -> bytes:
    body = header.model_dump_json().encode()
    return struct.pack(">I", len(body)) + body


def decode_header(body: bytes) -> BoundaryHeader:
    try:
        return BoundaryHeader.model_validate_json(body)
    except pydantic.ValidationError as exc:
        raise MalformedMessage(f"bad boundary header: {exc.error_count()} errors") from exc
