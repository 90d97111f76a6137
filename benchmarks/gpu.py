"""One round of a ~124M Llama on a CUDA device: bare loop against the miner, a bitwise replay, validator cost.

    python -m benchmarks gpu [--json PATH] [--preset llama-124m] [--dtype float32|bf16-autocast]

- tokens_per_s_bare: H plain AdamW steps (torch.optim.AdamW) on the device;
- tokens_per_s_miner: the miner's streamed round on the device (checkpoints every k steps,
  each hashed and written to disk as CPU float32, the derived update compressed);
- miner_ratio = bare ÷ miner tokens/s (target <= 1.05);
- replay_bitwise: one challenged segment, replayed from its stored start checkpoint, ends on
  the committed checkpoint hash bit for bit;
- cost_ratio: the validator's whole check of the round (derivation, that replay) and its
  usefulness score, over the miner's round.

Without CUDA it says so and exits 0 (CI has no GPU). It imports only the core, the
validator's scoring rules and numpy/torch/safetensors/blake3/pydantic/pynacl: no libp2p, so
it runs on a machine whose Python cannot build libp2p's dependencies. `measure` runs on any
device, which is how the tests exercise it on CPU with a micro preset.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

NO_CUDA = "no CUDA device (torch.cuda.is_available() is False): the GPU benchmark did not run"


def _synced(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _corpus(vocab: int, block: int) -> Any:
    """Seeded random tokens: throughput does not depend on what the tokens say."""
    import numpy as np

    from protocol.core.train.data import from_tokens

    page = max(4096, 4 * block)
    tokens = np.random.default_rng(0).integers(0, vocab, size=200 * page, dtype=np.int64)
    return from_tokens(tokens, "random tokens", page_tokens=page, heldout_every=20, vocab_size=vocab)


def bare_tokens_per_s(model_cfg: Any, cfg: Any, batches: Any, placement: Any, theta: Any) -> float:
    import torch

    from protocol.core.model.gpt import build_model, load_params

    model = build_model(model_cfg).to(placement.torch_device)
    load_params(model, theta)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.inner_lr, betas=(cfg.beta1, cfg.beta2), eps=cfg.eps,
                            weight_decay=cfg.weight_decay, foreach=False)
    _synced(placement.device)
    start = time.perf_counter()
    for step in range(cfg.inner_steps):
        x, y = batches(step)  # (B, T), (B, T)
        opt.zero_grad(set_to_none=True)
        with placement.autocast():
            loss = model(x.to(placement.torch_device), y.to(placement.torch_device))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip, foreach=False)
        opt.step()
    _synced(placement.device)
    return cfg.inner_steps * cfg.batch_size * model_cfg.block_size / (time.perf_counter() - start)


def measure(device: str, preset_name: str, steps: int, every: int, batch_size: int, dtype: str,
            folder: Path) -> dict[str, Any]:
    from miner.checkpoint_files import store_checkpoint
    from protocol.core.aggregation.state import genesis_state
    from protocol.core.crypto.hashing import blake3_hash
    from protocol.core.crypto.signing import NodeIdentity
    from protocol.core.hardware.observe import observe_profile
    from protocol.core.hardware.replay_profile import ReplayProfile
    from protocol.core.model.gpt import build_model, num_params, preset
    from protocol.core.model.placement import placement_of
    from protocol.core.proof.challenge import make_challenge
    from protocol.core.proof.replay import ReplayStatus
    from protocol.core.proof.submission import honest_streamed
    from protocol.core.proof.trace import zero_carry_hash
    from protocol.core.proof.verdict import judge, verify_submission
    from protocol.core.train.compute_config import ComputeConfig
    from protocol.core.train.training import RoundTask, batch_fn, local_stepper
    from protocol.node.profile_setup import apply_profile
    from validator.scoring import RoundEntry, usefulness_of

    profile = observe_profile(ReplayProfile(device=device, dtype=dtype))
    apply_profile(profile)
    model_cfg = preset(preset_name)
    cfg = ComputeConfig(inner_steps=steps, checkpoint_every=every, batch_size=batch_size)
    ds = _corpus(model_cfg.vocab_size, model_cfg.block_size)
    task = RoundTask(b"bench-gpu", 1, b"\x01" * 20, model_cfg, cfg)
    theta = genesis_state(model_cfg, cfg, 0).params
    batches, placement = batch_fn(task, ds), placement_of(profile)
    bare_tokens_per_s(model_cfg, cfg, batches, placement, theta)  # warm-up: kernels, allocator
    bare = bare_tokens_per_s(model_cfg, cfg, batches, placement, theta)

    _synced(device)
    start = time.perf_counter()
    work = honest_streamed(task, ds, theta, None, lambda _leaf, c, _digests: store_checkpoint(folder, c, model_cfg),
                           stepper=local_stepper(profile, build_model(model_cfg), batches, cfg))
    _synced(device)
    miner_s = time.perf_counter() - start

    ch = make_challenge(NodeIdentity(b"\x11" * 32), 1, task.miner, b"\x22" * 32, cfg)

    def fetch(leaf: int) -> bytes | None:
        return (folder / work.stored[leaf].hex()).read_bytes()

    start = time.perf_counter()
    verification = verify_submission(task, ds, theta, zero_carry_hash(model_cfg), work.root, work.trace, work.blob,
                                     fetch, ch.segments, profile)
    useful = usefulness_of([RoundEntry(task, 0, work.blob, True)], ds, theta, blake3_hash("validator-seed", b"g"),
                           device=placement.device)
    _synced(device)
    validator_s = time.perf_counter() - start
    tokens = steps * batch_size * model_cfg.block_size
    return {
        "figures": {
            "tokens_per_s_bare": bare,
            "tokens_per_s_miner": tokens / miner_s,
            "miner_ratio": bare / (tokens / miner_s),
            "replay_bitwise": all(r.status is ReplayStatus.MATCH for r in verification.replays),
            "proof_holds": judge(verification).kind is None,
            "cost_ratio": validator_s / miner_s,
        },
        "config": {"preset": preset_name, "params": num_params(model_cfg), "device": device, "dtype": dtype,
                   "inner_steps": steps, "checkpoint_every": every, "batch_size": batch_size,
                   "block_size": model_cfg.block_size, "segments_replayed": list(ch.segments),
                   "gpu": profile.gpu_model, "compute_capability": profile.compute_capability,
                   "cuda": profile.cuda_version, "cudnn": profile.cudnn_version},
        "seconds": {"miner": miner_s, "validator": validator_s},
        "heldout_gain": next(iter(useful.values())).heldout_gain if useful else None,
        "targets": {"miner_ratio": 1.05},
    }


def render(result: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"one round on {result['config']['gpu'] or result['config']['device']}")
    table.add_column("figure")
    table.add_column("value", justify="right")
    for key, value in result["figures"].items():
        table.add_row(key, f"{value:,.3f}" if isinstance(value, float) else str(value))
    Console(width=120).print(table)
    print(f"config: {result['config']}")


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks gpu")
    ap.add_argument("--json", type=Path, default=None, help="write the results here")
    ap.add_argument("--preset", default="llama-124m")
    ap.add_argument("--dtype", default="float32", choices=("float32", "bf16-autocast"))
    ap.add_argument("--steps", type=int, default=30, help="H: inner steps of the round")
    ap.add_argument("--every", type=int, default=3, help="k: steps per checkpoint")
    ap.add_argument("--batch-size", type=int, default=8)
    args = ap.parse_args(argv)
    # cuBLAS reads this when CUDA starts: set before torch touches the device
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    import torch

    if not torch.cuda.is_available():
        print(NO_CUDA)
        if args.json:
            args.json.write_text(json.dumps({"figures": {}, "cuda": False, "reason": NO_CUDA}, indent=2))
        return 0
    with tempfile.TemporaryDirectory(prefix="bench-gpu-") as tmp:
        result = measure("cuda", args.preset, args.steps, args.every, args.batch_size, args.dtype, Path(tmp))
    render(result)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
