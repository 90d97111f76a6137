"""Training throughput of a hardware class: a few inner steps of the run's model, timed.

Run in a `ProfileWorker` of the class (`measure_class`), so the ISA and thread count are the
class's own. The batches are seeded random tokens: speed does not depend on the text, and
no corpus has to be loaded. Timing is wall clock, so this lives in the shell, not the core.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from protocol.core.model import ModelConfig, build_model, init_params
from protocol.core.replay_profile import ReplayProfile
from protocol.core.training import BatchFn, ComputeConfig, RoundTask, fresh_checkpoint, run_steps
from protocol.node.worker_pool import ProfileWorker


@dataclass(frozen=True)
class Throughput:
    steps: int  # timed inner steps (after one untimed warm-up step)
    seconds: float  # wall time of the timed steps
    tokens_per_step: int  # batch_size x block_size

    @property
    def tokens_per_s(self) -> float:
        return self.steps * self.tokens_per_step / self.seconds

    @property
    def seconds_per_step(self) -> float:
        return self.seconds / self.steps


def _random_batches(model: ModelConfig, batch_size: int) -> BatchFn:
    gen = torch.Generator().manual_seed(0)

    def batches(step: int) -> tuple[torch.Tensor, torch.Tensor]:
        tokens = torch.randint(model.vocab_size, (batch_size, model.block_size + 1), generator=gen)
        return tokens[:, :-1], tokens[:, 1:]  # (B, T), (B, T)

    return batches


def time_steps(model: ModelConfig, cfg: ComputeConfig, seconds: float = 2.0, max_steps: int = 200,
               slowdown: float = 1.0) -> Throughput:
    """Inner steps of `model` under `cfg` for about `seconds` (at least 2 timed steps);
    `slowdown` > 1 sleeps after each step as a throttled miner does (tests, devnet)."""
    net = build_model(model)
    task = RoundTask(b"throughput", 0, bytes(20), model, cfg)
    ckpt = fresh_checkpoint(task, init_params(model, 0), None)
    batches = _random_batches(model, cfg.batch_size)
    ckpt, _ = run_steps(net, ckpt, 1, batches, cfg)  # warm-up: allocation, first dispatch
    steps, start = 0, time.perf_counter()
    while steps < 2 or (time.perf_counter() - start < seconds and steps < max_steps):
        began = time.perf_counter()
        ckpt, _ = run_steps(net, ckpt, 1, batches, cfg)
        time.sleep(max(slowdown - 1, 0.0) * (time.perf_counter() - began))
        steps += 1
    return Throughput(steps, time.perf_counter() - start, cfg.batch_size * model.block_size)


def measure_class(profile: ReplayProfile, model: ModelConfig, cfg: ComputeConfig, seconds: float = 2.0) -> Throughput:
    """`time_steps` in a fresh worker of `profile`; raises ProfileMismatch if it cannot run it."""
    with ProfileWorker(profile) as worker:
        return worker.call(time_steps, model, cfg, seconds)
