"""A checkpoint's header and digest list, and the bounds its readers apply, without torch.

What a peer can check of a checkpoint file before (or without) reading a tensor: the
safetensors metadata holding the header and every tensor's digest (`read_metadata`), the hash
over them (`hash_digests`), and the size bounds. The tensors themselves are format.py's; the
p2p layer and the blob caps read this module without loading torch.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from protocol.core.crypto.hashing import Digest, StreamHasher
from protocol.core.errors import VeritrainError

RNG_STATE_BYTES = 5056  # torch CPU generator (mt19937) state size
MAX_HEADER_BYTES = 1 << 20  # a safetensors JSON header larger than 1 MiB is refused
_META_KEY = "veritrain"
Leaves = dict[str, Digest]  # tensor key -> digest (`tensor_digest`)


class CheckpointFormatError(VeritrainError):
    """Raised when checkpoint bytes are malformed, too large, or do not fit the model."""


class BlobFormatError(VeritrainError):
    """Raised when a safetensors blob (checkpoint or update) is malformed or over its size cap."""


class CheckpointHeader(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    format: Literal["veritrain-checkpoint"] = "veritrain-checkpoint"
    version: Literal[3] = 3  # 3: hashed per tensor
    step: int = Field(ge=0, le=10**9)
    model: str = Field(pattern=r"^[0-9a-f]{64}$")  # hex model config hash
    has_ef: bool
    warm: bool


def hash_digests(domain: str, header: bytes, leaves: Mapping[str, bytes]) -> Digest:
    """The root over a header and named digests (sorted by name): a checkpoint's or a carry's hash."""
    h = StreamHasher(domain)
    h.update(header)
    for key in sorted(leaves):
        h.update(key.encode())
        h.update(leaves[key])
    return h.digest()


def header_bytes(header: CheckpointHeader) -> bytes:
    return header.model_dump_json().encode()


def checkpoint_metadata(header: CheckpointHeader, leaves: Mapping[str, bytes]) -> dict[str, str]:
    """The safetensors metadata of a checkpoint or a part: one key (safetensors writes several
    in no fixed order), holding {"header": …, "leaves": {tensor key: hex digest}}."""
    body = {"header": header.model_dump(), "leaves": {k: leaves[k].hex() for k in sorted(leaves)}}
    return {_META_KEY: json.dumps(body, separators=(",", ":"))}


def read_metadata(meta: Mapping[str, object]) -> tuple[CheckpointHeader, Leaves]:
    try:
        body = json.loads(str(meta.get(_META_KEY, "")))
        header = CheckpointHeader.model_validate(body["header"])
        raw = body["leaves"]
    except (ValueError, TypeError, KeyError) as exc:  # ValidationError is a ValueError
        raise CheckpointFormatError(f"bad checkpoint metadata: {exc}") from exc
    if not isinstance(raw, dict) or not all(isinstance(v, str) and len(v) == 64 for v in raw.values()):
        raise CheckpointFormatError("the digest list must map tensor keys to 32-byte hex digests")
    try:
        return header, {str(k): Digest(bytes.fromhex(v)) for k, v in raw.items()}
    except ValueError as exc:
        raise CheckpointFormatError(f"bad digest list: {exc}") from exc
