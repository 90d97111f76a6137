"""Genesis θ is a function of the seed alone (docs/PROTOCOL.md §2.5): golden
vectors, a from-the-spec reference, the same bits on every CPU dispatch level and thread count,
and the std each tensor is meant to have."""

from __future__ import annotations

import json
import math
import os
import struct
import subprocess
import sys

import blake3
import pytest
import torch

from protocol.core.crypto.hashing import content_hash
from protocol.core.model.gpt import INIT_STD, flatten, init_params, preset, uniform_init

MICRO = preset("micro")
# blake3 of each random tensor's float32 little-endian row-major bytes, micro preset, seed 0
MICRO_SEED0 = {
    "wte.weight": "1ae0ba8b43666d9c38a88660bec37a7aad1fddac03b593d6a1d9572f87f587ab",
    "wpe.weight": "dd6cdfbb1ecfeab856338d28f22aad6db83fe076e5b0aacecde1a998859b36d2",
    "h.0.attn.c_attn.weight": "7f0c3e41ca5301290ca071bb887009ccdfc3f391434c90cddc1055c0af8ebfa5",
    "h.0.attn.c_proj.weight": "6518a759b58adbda0d878d332b14ee4187d6397bd8ba588c203d552d86a4ca3f",
    "h.0.mlp.c_fc.weight": "5371b7d0e0fd97679b5f053c88c39f54586fc348e1626c36b45fb37b4d44e8f5",
    "h.0.mlp.c_proj.weight": "ebc24997b05e72589cb74fca5539029a44bdea8149e7ed106624fbe452901ee0",
    "h.1.attn.c_attn.weight": "65319b64a1784b6974d450b85caa58010dc97da2fbd40d1d497b8cb2a198128c",
    "h.1.attn.c_proj.weight": "d1275e2b040da272006089dcae849b5034debbb683c488d4834f17957905bb5d",
    "h.1.mlp.c_fc.weight": "3946d8f6802f338974095716852c80744b7634cdfdf087206373184490f2a7bf",
    "h.1.mlp.c_proj.weight": "1b730b2a8c2b137e940845c584d24fc4bc406ca27c3727716a86407902d4cb11",
    "lm_head.weight": "82b870dd302e35fb5baf54130d9d5451ca3ffedb51b805ff64fd38e095acf43a",
}
LLAMA_MICRO_SEED0 = "f6530109ad49caf28cecc8fc6d3e684e4f7c0dc1d2e4e658b0dbfae59971428b"  # blake3 of flatten(θ)


def _tensor_hash(t: torch.Tensor) -> str:
    return content_hash(t.contiguous().numpy().tobytes()).hex()


def test_micro_genesis_golden_vectors() -> None:
    params = init_params(MICRO, 0)
    assert params["wte.weight"].reshape(-1)[:4].tolist() == [
        0.006222424563020468, -0.02830289490520954, 0.031431689858436584, -0.004491048865020275]
    assert params["h.1.mlp.c_proj.weight"].reshape(-1)[:4].tolist() == [
        0.006123812403529882, 0.0145304249599576, 0.0057149725034832954, 0.013737480156123638]
    assert {k: _tensor_hash(v) for k, v in params.items() if v.dim() >= 2} == MICRO_SEED0
    for name, t in params.items():  # gains 1, biases 0
        assert t.dtype == torch.float32
        if t.dim() == 1:
            assert torch.equal(t, torch.full_like(t, 1.0 if name.endswith("weight") else 0.0)), name
    assert _tensor_hash(flatten(init_params(preset("llama-micro"), 0))) == LLAMA_MICRO_SEED0


def _framed_key(seed: int, name: str) -> bytes:
    """The per-tensor key as the spec writes it: blake3 over length-framed domain tag and parts."""
    parts = [b"veritrain/v1/genesis-init", str(seed).encode(), name.encode()]
    return blake3.blake3(b"".join(struct.pack("<Q", len(p)) + p for p in parts)).digest()


def _f32(x: float) -> float:
    return struct.unpack("<f", struct.pack("<f", x))[0]  # round to nearest float32


def _reference_value(seed: int, name: str, std: float, i: int) -> float:
    """Value i from the spec with Python integers and float64 only (a foreign implementation)."""
    (x,) = struct.unpack("<I", blake3.blake3(_framed_key(seed, name)).digest(length=4, seek=4 * i))
    j = 2 * (x >> 8) + 1 - 2**24
    c = _f32(std * math.sqrt(3.0))
    return _f32(j * c * 2.0**-24)  # j × c is exact in float64 (≤ 48 significant bits): one rounding


def test_values_follow_the_spec_across_the_chunk_boundary() -> None:
    n = (1 << 22) + 3  # one more pass of the stream than a chunk holds
    std = INIT_STD / math.sqrt(2 * 3)
    t = uniform_init(7, "layers.2.mlp.down_proj.weight", (n,), std)
    for i in (0, 1, 2, (1 << 22) - 1, 1 << 22, n - 1):
        assert t[i].item() == _reference_value(7, "layers.2.mlp.down_proj.weight", std, i), i
    micro = init_params(MICRO, 5)
    std_proj = INIT_STD / math.sqrt(2 * MICRO.n_layer)
    for name, std in (("wte.weight", INIT_STD), ("h.0.attn.c_proj.weight", std_proj)):
        flat = micro[name].reshape(-1)
        assert [flat[i].item() for i in range(5)] == [_reference_value(5, name, std, i) for i in range(5)]


def test_each_tensor_has_the_intended_std() -> None:
    """Sample std within 5 standard errors of the intended one: for a uniform law the std of the
    sample std is std·sqrt(0.2 / n) (kurtosis 1.8). Values never leave (-std√3, std√3)."""
    for cfg in (MICRO, preset("llama-micro")):
        std_proj = INIT_STD / math.sqrt(2 * cfg.n_layer)
        for name, t in init_params(cfg, 11).items():
            if t.dim() < 2:
                continue
            want = std_proj if name.endswith(("c_proj.weight", "o_proj.weight", "down_proj.weight")) else INIT_STD
            x = t.double().reshape(-1)
            assert abs(x.std().item() / want - 1) < 5 * math.sqrt(0.2 / x.numel()), name
            assert abs(x.mean().item()) < 5 * want / math.sqrt(x.numel()), name
            assert x.abs().max().item() < want * math.sqrt(3.0), name
    big = uniform_init(0, "big", (1 << 20,), 0.02).double()  # tolerance 0.22 %
    assert abs(big.std().item() / 0.02 - 1) < 5 * math.sqrt(0.2 / big.numel())


_CHILD = """
import json, sys, torch
from protocol.core.crypto.hashing import content_hash
from protocol.core.model.gpt import flatten, init_params, preset
out = {"capability": torch.backends.cpu.get_cpu_capability()}
for threads in (1, 2):
    torch.set_num_threads(threads)
    out[threads] = [content_hash(flatten(init_params(preset(p), 0)).numpy().tobytes()).hex()
                    for p in ("micro", "llama-micro")]
print(json.dumps(out))
"""


@pytest.mark.parametrize(("isa", "reported"), [("avx2", "AVX2"), ("default", "DEFAULT")])
def test_same_genesis_under_every_dispatch_level_and_thread_count(isa: str, reported: str) -> None:
    """A child with ATEN_CPU_CAPABILITY set before torch loads (and, for the no-SIMD case,
    numpy's AVX2 loops off too) computes the pinned genesis under 1 and 2 threads."""
    if isa == "avx2" and torch.backends.cpu.get_cpu_capability() == "DEFAULT":
        pytest.skip("host has no AVX2 (torch reports DEFAULT)")
    env = {**os.environ, "ATEN_CPU_CAPABILITY": isa}
    if isa == "default":
        env["NPY_DISABLE_CPU_FEATURES"] = "X86_V3"  # numpy's AVX2/FMA group (x86_64 baseline is X86_V2)
    run = subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True, text=True, timeout=300,
                         check=False)
    assert run.returncode == 0, run.stderr
    got = json.loads(run.stdout)
    assert got["capability"] == reported
    micro = _tensor_hash(flatten(init_params(MICRO, 0)))
    assert got["1"] == got["2"] == [micro, LLAMA_MICRO_SEED0]
