"""Training throughput of a hardware class: a few inner steps of the run's model, timed.

Run in a `ProfileWorker` of the class (`measure_class`), so the ISA and thread count are the
class's own. The batches are seeded random tokens: speed does not depend on the text, and
no corpus has to be loaded. Timing is wall clock, so this lives in the shell, not the core.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

import torch

from protocol.core.hardware.replay_profile import ReplayProfile
from protocol.core.model.gpt import ModelConfig, build_model, init_params
from protocol.core.train.compute_config import ComputeConfig
from protocol.core.train.training import BatchFn, RoundTask, fresh_checkpoint, run_steps
from protocol.node.worker_pool import ProfileWorker

# A throttled miner (tests, devnet) is also no faster than 8 steps a second, so on any machine it
# plans at most 80 steps in half of a 20 s window (60 at k = 30), while an honest one plans more
# even when it measured itself at 0.055 s a step beside other networks on CI's two cores (2.3x
# margin); its pace is set by sleeping, not by the CPU other processes share.
THROTTLED_MIN_STEP_S = 0.125


def throttle_pause(slowdown: float, step_s: float) -> float:
    """Seconds a miner `slowdown` times slower sleeps after a step that took `step_s`."""
    if slowdown <= 1:
        return 0.0
    return max((slowdown - 1) * step_s, THROTTLED_MIN_STEP_S - step_s)


@dataclass(frozen=True)
class Throughput:
    steps: int  # timed inner steps (after one untimed warm-up step)
    seconds: float  # wall time of the timed steps
    tokens_per_step: int  # batch_size x block_size
    median_step_s: float  # the median step: a stall while other processes boot is not the machine's speed

    @property
    def tokens_per_s(self) -> float:
        return self.tokens_per_step / self.median_step_s

    @property
    def seconds_per_step(self) -> float:
        return self.median_step_s


def _random_batches(model: ModelConfig, batch_size: int) -> BatchFn:
    gen = torch.Generator().manual_seed(0)

    def batches(step: int) -> tuple[torch.Tensor, torch.Tensor]:
        tokens = torch.randint(model.vocab_size, (batch_size, model.block_size + 1), generator=gen)
        return tokens[:, :-1], tokens[:, 1:]  # (B, T), (B, T)

    return batches


def time_steps(model: ModelConfig, cfg: ComputeConfig, seconds: float = 2.0, max_steps: int = 200,
               slowdown: float = 1.0) -> Throughput:
    """Inner steps of `model` under `cfg` for about `seconds` (at least 3 timed steps);
    `slowdown` > 1 sleeps after each step as a throttled miner does (tests, devnet; `throttle_pause`)."""
    net = build_model(model)
    task = RoundTask(b"throughput", 0, bytes(20), model, cfg)
    ckpt = fresh_checkpoint(task, init_params(model, 0), None)
    batches = _random_batches(model, cfg.batch_size)
    ckpt, _ = run_steps(net, ckpt, 1, batches, cfg)  # warm-up: allocation, first dispatch
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < 3 or (time.perf_counter() - start < seconds and len(times) < max_steps):
        began = time.perf_counter()
        ckpt, _ = run_steps(net, ckpt, 1, batches, cfg)
        time.sleep(throttle_pause(slowdown, time.perf_counter() - began))
        times.append(time.perf_counter() - began)
    return Throughput(len(times), time.perf_counter() - start, cfg.batch_size * model.block_size,
                      statistics.median(times))


def measure_class(profile: ReplayProfile, model: ModelConfig, cfg: ComputeConfig, seconds: float = 2.0) -> Throughput:
    """`time_steps` in a fresh worker of `profile`; raises ProfileMismatch if it cannot run it."""
    with ProfileWorker(profile) as worker:
        return worker.call(time_steps, model, cfg, seconds)
