"""Our hand-written safetensors layout is a file any safetensors reader loads, tensor for tensor."""

from __future__ import annotations

import json
import struct

import safetensors.torch
import torch

from protocol.core.checkpoint.safetensors_layout import safetensors_layout, serialized


def test_every_dtype_we_write_loads_back_bit_for_bit_with_each_tensor_aligned() -> None:
    gen = torch.Generator().manual_seed(0)
    tensors = {
        "p/w": torch.randn(3, 5, generator=gen),
        "b16": torch.randn(7, generator=gen).to(torch.bfloat16),
        "rng": torch.randint(0, 255, (13,), dtype=torch.uint8, generator=gen),
        "i64": torch.arange(4, dtype=torch.int64),
        "scalar": torch.tensor(2.5),
        "empty": torch.zeros(0, 4),
        "strided": torch.randn(4, 6, generator=gen).t(),  # not contiguous: written as its values
    }
    blob = b"".join(serialized(tensors, {"veritrain": "{}"}))
    back, meta = safetensors.torch.load(blob), json.loads(blob[8 : 8 + struct.unpack("<Q", blob[:8])[0]])
    assert set(back) == set(tensors) and meta["__metadata__"] == {"veritrain": "{}"}
    for key, t in tensors.items():
        assert back[key].dtype == t.dtype and torch.equal(back[key], t), key
    n = struct.unpack("<Q", blob[:8])[0]
    assert n % 8 == 0
    for key in safetensors_layout(tensors, {}).order:
        start = meta[key]["data_offsets"][0]
        assert start % tensors[key].element_size() == 0, key  # aligned: larger elements come first


def test_the_layout_does_not_depend_on_insertion_order() -> None:
    a = {"x": torch.ones(2), "y": torch.zeros(3, dtype=torch.uint8)}
    b = {"y": a["y"], "x": a["x"]}
    assert b"".join(serialized(a, {})) == b"".join(serialized(b, {}))
