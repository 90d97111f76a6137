"""The safetensors layout our checkpoints are written in: a header, then raw tensor bytes.

Writing it by hand (not with `safetensors.save`) lets a writer stream each tensor's bytes to a
file while hashing them (miner/checkpoint_files.py): one pass, no serialized copy, no read-back.
The files are ordinary safetensors (any safetensors reader loads them): tensors ordered by
element size, largest first, then by name, so each is aligned to its element size; the header
padded with spaces to 8 bytes, as safetensors pads it. Pure: the caller writes the bytes.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from protocol.core.checkpoint.tensor_subset import frame_header

_DTYPES = {torch.float64: "F64", torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16",
           torch.int64: "I64", torch.int32: "I32", torch.int16: "I16", torch.int8: "I8", torch.uint8: "U8",
           torch.bool: "BOOL"}


@dataclass(frozen=True)
class SafetensorsLayout:
    head: bytes  # u64le header length, then the header JSON
    order: tuple[str, ...]  # the tensors' keys in the order their bytes follow


def safetensors_layout(tensors: Mapping[str, Tensor], metadata: Mapping[str, str]) -> SafetensorsLayout:
    order = tuple(sorted(tensors, key=lambda k: (-tensors[k].element_size(), k)))
    header: dict[str, Any] = {"__metadata__": dict(metadata)} if metadata else {}
    at = 0
    for key in order:
        t = tensors[key]
        size = t.numel() * t.element_size()
        header[key] = {"dtype": _DTYPES[t.dtype], "shape": list(t.shape), "data_offsets": [at, at + size]}
        at += size
    return SafetensorsLayout(frame_header(header), order)


def tensor_bytes(t: Tensor) -> memoryview:
    """`t`'s raw little-endian bytes, without a copy when it is contiguous on the CPU."""
    return memoryview(t.detach().contiguous().reshape(-1).view(torch.uint8).numpy())  # type: ignore[arg-type]


def serialized(tensors: Mapping[str, Tensor], metadata: Mapping[str, str]) -> Iterator[bytes | memoryview]:
    """The file's bytes, in pieces: the header, then each tensor's bytes."""
    layout = safetensors_layout(tensors, metadata)
    yield layout.head
    for key in layout.order:
        yield tensor_bytes(tensors[key])
