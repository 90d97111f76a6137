"""Builders shared by tests/core and tests/validator (loaded by both conftests).

Everything runs on the `micro` preset with a small corpus slice and H=6, k=2 (3 segments),
so one honest round takes ~0.2 s on one core; one test keeps the defaults H=30, k=3.
"""

from __future__ import annotations

from functools import lru_cache

from protocol.config.corpus import stdlib_files
from protocol.core.hardware.observe import observe_profile
from protocol.core.hardware.replay_profile import ReplayProfile
from protocol.core.model.gpt import ModelConfig, Params, init_params, preset
from protocol.core.train import data
from protocol.core.train.compute_config import ComputeConfig
from protocol.core.train.training import RoundTask
from protocol.node.profile_setup import apply_profile

RUN_SEED = b"veritrain-test-run"
MICRO = preset("micro")
SMALL_CFG = ComputeConfig(inner_steps=6, checkpoint_every=2, batch_size=4, pages_per_miner=4)


def make_profile() -> ReplayProfile:
    """threads=1 and this host's ISA (the worker test checks the avx2 default separately)."""
    return ReplayProfile(threads=1, cpu_capability=observe_profile().cpu_capability)


def apply_test_profile() -> ReplayProfile:
    p = make_profile()
    apply_profile(p)
    return p


@lru_cache(maxsize=1)
def corpus() -> data.Dataset:
    """~300 KB of the stdlib corpus, 1 KiB-token pages, 1 page in 10 held out."""
    root, files = stdlib_files()
    ordered = sorted(files, key=lambda p: p.relative_to(root).as_posix())
    raw = b"".join(p.read_bytes() for p in ordered[:30])[:300_000]
    return data.from_bytes(raw, "test slice", page_tokens=1024, heldout_every=10)


@lru_cache(maxsize=1)
def theta0() -> Params:
    return init_params(MICRO, 0)


def miner(i: int) -> bytes:
    return bytes([0xA0 + i % 64]) * 19 + bytes([i])


def task(i: int, round_: int = 1, cfg: ComputeConfig = SMALL_CFG,
         model: ModelConfig = MICRO, run_seed: bytes = RUN_SEED) -> RoundTask:
    return RoundTask(run_seed, round_, miner(i), model, cfg)


def checkpoint_file(tag: bytes) -> bytes:
    """A file a data dir serves as a checkpoint: safetensors with a checkpoint header and digest
    list (it reads only those to know which part it holds; the tensor's digest is not checked)."""
    import json

    import safetensors.torch
    import torch

    header = {"format": "veritrain-checkpoint", "version": 3, "step": 0, "model": "ab" * 32, "has_ef": False,
              "warm": False}
    meta = {"veritrain": json.dumps({"header": header, "leaves": {"p/x": "00" * 32}})}
    return safetensors.torch.save({"p/x": torch.frombuffer(bytearray(tag), dtype=torch.uint8)}, meta)

