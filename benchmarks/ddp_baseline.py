"""The vs-DDP baseline: real torch.distributed DDP (gloo, 127.0.0.1) and a lone worker.

Both sides of `python -m benchmarks vs-ddp` share what is defined here:
  - `Spec`: model preset, corpus, W workers, the DDP step budget B, held-out batches;
  - the data stream: DDP worker w at step s trains on exactly the batch veritrain miner w
    draws at step s mod P of round s div P (P = `data_period`, 30 = the default H), so with
    H = P both sides see the same tokens in the same order;
  - the held-out batches (same pages, same windows) every curve is measured on.

DDP uses torch.optim.AdamW with the protocol's inner hyperparameters (betas, eps, decoupled
weight decay on matrices only, gradient-norm clip) and a constant learning rate chosen by a
small sweep. A DDP communication hook counts the gradient bytes each bucket all-reduces;
per step each worker sends and receives 2(W-1)/W x those bytes in gloo's ring all-reduce.
"""

from __future__ import annotations

import functools
import json
import os
import socket
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as tmp
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel

from benchmarks.overhead import corpus_slice
from protocol.config.corpus import from_stdlib
from protocol.core.crypto.hashing import blake3_hash
from protocol.core.model.gpt import (
    LanguageModel,
    build_model,
    flatten,
    init_params,
    load_params,
    preset,
)
from protocol.core.train import data
from protocol.core.train.compute_config import ComputeConfig
from protocol.core.train.training import BatchFn, RoundTask, batch_fn

Batch = tuple[torch.Tensor, torch.Tensor]  # (x, y), each (B, T) int64


@dataclass(frozen=True)
class Spec:
    preset: str = "tiny"  # model preset (the issue fixes "tiny")
    corpus: str = "stdlib"  # "stdlib" (default corpus) or "slice:N" (first N bytes of it)
    workers: int = 4  # W: DDP ranks = veritrain miners
    ddp_steps: int = 200  # B: DDP steps per worker; veritrain may run up to max_factor x B
    max_factor: int = 4  # veritrain's token allowance relative to DDP
    data_period: int = 30  # P: steps per page assignment in the DDP/single stream
    heldout_n: int = 8  # held-out batches per loss estimate (same for every curve)
    eval_points: int = 10  # DDP/single evaluate every B / eval_points steps
    run_seed: bytes = b"vs-ddp"  # seeds page assignment and batches (protocol sampler)
    base: ComputeConfig = field(default_factory=ComputeConfig)  # batch size, AdamW, pages

    @property
    def eval_every(self) -> int:
        return max(1, self.ddp_steps // self.eval_points)

    @property
    def tokens_per_step(self) -> int:
        """Tokens one worker consumes per step (batch x context)."""
        return self.base.batch_size * preset(self.preset).block_size


@functools.lru_cache(maxsize=4)
def dataset(name: str) -> data.Dataset:
    if name == "stdlib":
        return from_stdlib()
    if name.startswith("slice:"):
        return corpus_slice(int(name.removeprefix("slice:")))
    raise ValueError(f"unknown corpus {name!r}")


def miner_address(w: int) -> bytes:
    return bytes([w + 1]) * 20


def heldout(spec: Spec) -> list[Batch]:
    m = preset(spec.preset)
    return data.heldout_batches(dataset(spec.corpus), b"vs-ddp-heldout", spec.heldout_n,
                                spec.base.batch_size, m.block_size)


def heldout_loss(model: torch.nn.Module, batches: list[Batch]) -> float:
    """Mean cross-entropy of `model` over the held-out batches."""
    with torch.no_grad():
        return sum(float(model(x, y)) for x, y in batches) / len(batches)


class Stream:
    """Worker w's batches: the protocol sampler with pages re-assigned every P steps."""

    def __init__(self, spec: Spec, w: int) -> None:
        self.spec, self.w = spec, w
        self._round: int = -1  # the page-assignment round `_fn` serves
        self._fn: BatchFn | None = None

    def __call__(self, step: int) -> Batch:
        r, i = divmod(step, self.spec.data_period)
        if r != self._round or self._fn is None:
            task = RoundTask(self.spec.run_seed, r, miner_address(self.w), preset(self.spec.preset),
                             self.spec.base)
            self._round, self._fn = r, batch_fn(task, dataset(self.spec.corpus))
        return self._fn(i)


def make_adamw(model: torch.nn.Module, lr: float, cfg: ComputeConfig) -> torch.optim.AdamW:
    """The protocol's inner AdamW (decay on matrices only) as a torch optimizer."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": cfg.weight_decay},
              {"params": rest, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=lr, betas=(cfg.beta1, cfg.beta2), eps=cfg.eps,
                             foreach=False)


@dataclass
class Curve:
    """Held-out loss (and per-worker bytes sent + received) against steps per worker."""

    steps: list[int] = field(default_factory=list)
    loss: list[float] = field(default_factory=list)
    bytes: list[float] = field(default_factory=list)

    def add(self, step: int, loss: float, nbytes: float) -> None:
        self.steps.append(step)
        self.loss.append(loss)
        self.bytes.append(nbytes)


def _train(model: torch.nn.Module, inner: LanguageModel, spec: Spec, lr: float, steps: int, w: int,
           on_eval: bool) -> tuple[Curve, list[float]]:
    """The shared AdamW loop of a DDP rank (`model` is the DDP wrapper) or a lone worker."""
    opt, stream, hb = make_adamw(model, lr, spec.base), Stream(spec, w), heldout(spec)
    curve, step_s = Curve(), []
    if on_eval:
        curve.add(0, heldout_loss(inner, hb), 0.0)
    for step in range(steps):
        x, y = stream(step)  # (B, T), (B, T)
        start = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        model(x, y).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), spec.base.grad_clip, foreach=False)
        opt.step()
        step_s.append(time.perf_counter() - start)
        if on_eval and ((step + 1) % spec.eval_every == 0 or step + 1 == steps):
            curve.add(step + 1, heldout_loss(inner, hb), 0.0)  # bytes: filled in by caller
    return curve, step_s


def ring_factor(w: int) -> float:
    """Bytes each worker sends (and receives) per all-reduced byte in a ring all-reduce."""
    return 2 * (w - 1) / w


def _counting_allreduce(state, bucket):  # type: ignore[no-untyped-def]
    """DDP comm hook: count the bucket's bytes, then the stock averaging all-reduce.

    Left unannotated: DDP rejects a string annotation (this module postpones annotations).
    """
    buf = bucket.buffer()  # (n,) flattened gradients of this bucket
    state["bytes"] += buf.numel() * buf.element_size()
    return default_hooks.allreduce_hook(None, bucket)  # type: ignore[arg-type]


def _ddp_rank(rank: int, spec: Spec, lr: float, port: int, out_dir: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=spec.workers)
    m = preset(spec.preset)
    inner = build_model(m)
    load_params(inner, init_params(m, 0))  # the same θ_0 as veritrain's genesis state
    ddp = DistributedDataParallel(inner)
    counter = {"bytes": 0}
    ddp.register_comm_hook(counter, _counting_allreduce)
    start = time.perf_counter()
    curve, step_s = _train(ddp, inner, spec, lr, spec.ddp_steps, rank, rank == 0)
    wall = time.perf_counter() - start
    params = {k: p.detach() for k, p in inner.named_parameters()}
    report = {"rank": rank, "hooked_bytes": counter["bytes"], "curve": asdict(curve),
              "step_s": step_s, "wall_s": wall,
              "params_hash": blake3_hash("vs-ddp-params", flatten(params).numpy().tobytes()).hex()}
    Path(out_dir, f"rank{rank}.json").write_text(json.dumps(report))
    dist.destroy_process_group()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def run_ddp(spec: Spec, lr: float) -> dict[str, Any]:
    """W gloo ranks on 127.0.0.1 train B synchronized steps; returns rank 0's curve and counters."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    with tempfile.TemporaryDirectory(prefix="vs-ddp-") as out:
        tmp.start_processes(_ddp_rank, args=(spec, lr, free_port(), out), nprocs=spec.workers,
                            join=True, start_method="spawn")
        ranks = [json.loads(Path(out, f"rank{r}.json").read_text()) for r in range(spec.workers)]
    hooked = [r["hooked_bytes"] / spec.ddp_steps for r in ranks]  # gradient bytes per step
    wf = ring_factor(spec.workers)
    curve = ranks[0]["curve"]  # sent + received per worker: 2 x ring factor x hooked bytes
    curve["bytes"] = [2 * wf * hooked[0] * s for s in curve["steps"]]
    return {
        "lr": lr, "curve": curve,
        "grad_bytes_per_step": hooked[0],
        "sent_per_worker": [wf * h * spec.ddp_steps for h in hooked],
        "recv_per_worker": [wf * h * spec.ddp_steps for h in hooked],
        "params_hashes": [r["params_hash"] for r in ranks],
        "median_step_s": sorted(ranks[0]["step_s"])[len(ranks[0]["step_s"]) // 2],
        "wall_s": max(r["wall_s"] for r in ranks),
    }


def run_single(spec: Spec, steps: int, lr: float | None = None) -> dict[str, Any]:
    """One worker alone: the same AdamW, batch and stream (worker 0's) for `steps` steps
    (lr: the protocol's inner lr unless given)."""
    torch.set_num_threads(1)
    lr = spec.base.inner_lr if lr is None else lr
    m = preset(spec.preset)
    model = build_model(m)
    load_params(model, init_params(m, 0))
    curve, step_s = _train(model, model, spec, lr, steps, 0, True)
    return {"lr": lr, "curve": asdict(curve),
            "median_step_s": sorted(step_s)[len(step_s) // 2]}
