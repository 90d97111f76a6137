"""Miner overhead: one verifiable round vs a bare torch loop of the same steps.

    python -m benchmarks overhead [--quick] [--json PATH]

The miner round is training with a checkpoint every k steps (snapshot + content hash),
the trace, compression with error feedback, and the ed25519 signature over the update hash.
The bare loop runs the same model on the same batches with torch.optim.AdamW and nothing
else. Trials alternate the two in one process; the figure is the median paired ratio
(target <= 1.10).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch
from rich.console import Console
from rich.table import Table

from protocol.config import corpus
from protocol.core.crypto.hashing import blake3_hash
from protocol.core.crypto.signing import NodeIdentity
from protocol.core.hardware.observe import observe_profile
from protocol.core.hardware.replay_profile import ReplayProfile
from protocol.core.model.gpt import (
    LanguageModel,
    build_model,
    init_params,
    load_params,
    num_params,
    preset,
)
from protocol.core.proof.trace import trace_root
from protocol.core.proof.work import build_work
from protocol.core.train import data
from protocol.core.train.compute_config import ComputeConfig
from protocol.core.train.training import BatchFn, RoundTask, batch_fn, train_round
from protocol.node.profile_setup import apply_profile


def corpus_slice(n_bytes: int) -> data.Dataset:
    root, files = corpus.stdlib_files()
    ordered = sorted(files, key=lambda p: p.relative_to(root).as_posix())
    raw, out = 0, []
    for p in ordered:
        out.append(p.read_bytes())
        raw += len(out[-1])
        if raw >= n_bytes:
            break
    return data.from_bytes(b"".join(out)[:n_bytes], "stdlib slice", page_tokens=4096,
                           heldout_every=20)


def bare_round(model: LanguageModel, theta: dict[str, torch.Tensor], batches: BatchFn,
               cfg: ComputeConfig) -> float:
    """The baseline: H plain AdamW steps, no checkpoints, hashing or compression."""
    start = time.perf_counter()
    load_params(model, theta)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.inner_lr, betas=(cfg.beta1, cfg.beta2),
                            eps=cfg.eps, weight_decay=cfg.weight_decay, foreach=False)
    for step in range(cfg.inner_steps):
        x, y = batches(step)  # (B, T), (B, T)
        opt.zero_grad(set_to_none=True)
        model(x, y).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip, foreach=False)
        opt.step()
    return time.perf_counter() - start


def miner_round(model: LanguageModel, task: RoundTask, ds: data.Dataset, theta: dict[str, torch.Tensor],
                ident: NodeIdentity) -> float:
    start = time.perf_counter()
    work = build_work(task, train_round(task, ds, theta, None, model=model), theta)
    ident.sign(blake3_hash("commit", work.blob, trace_root(work.trace)))
    return time.perf_counter() - start


def measure(quick: bool) -> dict[str, object]:
    name = "micro" if quick else "tiny"
    mcfg = preset(name)
    cfg = ComputeConfig()  # the protocol defaults: H=30, k=3, batch 8, top-192/4096, 2-bit
    profile = ReplayProfile(threads=1, cpu_capability=observe_profile().cpu_capability)
    apply_profile(profile)
    ds = corpus_slice(600_000)
    task = RoundTask(b"bench", 1, b"\x01" * 20, mcfg, cfg)
    theta = init_params(mcfg, 0)
    model, ident = build_model(mcfg), NodeIdentity(b"\x05" * 32)
    batches = batch_fn(task, ds)
    bare_round(model, theta, batches, cfg)  # warm-up
    miner_round(model, task, ds, theta, ident)
    trials = 3 if quick else 7
    bare, miner = [], []
    for _ in range(trials):
        bare.append(bare_round(model, theta, batches, cfg))
        miner.append(miner_round(model, task, ds, theta, ident))
    ratios = [m / b for m, b in zip(miner, bare, strict=True)]
    return {
        "figures": {"overhead_ratio": statistics.median(ratios)},
        "config": {"preset": name, "params": num_params(mcfg), "inner_steps": cfg.inner_steps,
                   "checkpoint_every": cfg.checkpoint_every, "batch_size": cfg.batch_size,
                   "threads": profile.threads, "trials": trials},
        "bare_s": bare, "miner_s": miner, "ratios": ratios, "target": 1.10,
    }


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks overhead")
    ap.add_argument("--quick", action="store_true", help="micro preset, 3 trials")
    ap.add_argument("--json", type=Path, default=None, help="write the results here")
    args = ap.parse_args(argv)
    result = measure(args.quick)
    table = Table(title="miner overhead (one round vs bare torch loop)")
    for col in ("trial", "bare s", "miner s", "ratio"):
        table.add_column(col, justify="right")
    for i, (b, m, r) in enumerate(zip(result["bare_s"], result["miner_s"],  # type: ignore[call-overload]
                                      result["ratios"], strict=True)):
        table.add_row(str(i), f"{b:.3f}", f"{m:.3f}", f"{r:.3f}")
    Console().print(table)
    ratio = result["figures"]["overhead_ratio"]  # type: ignore[index]
    print(f"overhead_ratio (median) = {ratio:.3f}  (target <= 1.10)  {result['config']}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0
