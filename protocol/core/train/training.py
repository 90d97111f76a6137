"""The miner's inner loop: H AdamW steps from θ_r, a checkpoint every k steps.

`ComputeConfig` (`protocol.core.train.compute_config`, torch-free) holds the run's defaults.
Call `protocol.node.profile_setup.apply_profile` (or run in a `ProfileWorker`) before anything
here. `run_steps` is the one function both the miner (training) and the validator (replay)
use, so a correct replay is bitwise equal to the miner's run. It runs on the profile's
device (`placement.Placement`) and hands back CPU checkpoints. A `Stepper` is how a node runs
a segment's steps: `LocalStepper` in this process, or a process group of `world_size` ranks
(`protocol.core.train.ddp`, launched by protocol/node/ddp_worker.py) behind the same call.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

import torch
from torch import Tensor

from protocol.core.checkpoint.format import Checkpoint, checkpoint_hash
from protocol.core.crypto.hashing import Digest, seed_int
from protocol.core.errors import ConfigError
from protocol.core.hardware.replay_profile import ReplayProfile
from protocol.core.model.dropout import lend_generator
from protocol.core.model.gpt import (
    LanguageModel,
    ModelConfig,
    Params,
    build_model,
    load_params,
    num_params,
    param_shapes,
)
from protocol.core.model.placement import CPU, Placement, placement_of
from protocol.core.train.compute_config import ComputeConfig
from protocol.core.train.data import Dataset, assign_pages, batch, miner_seed, pages_for_round


class ProcessGroupRequired(ConfigError):
    """Raised when a profile of world size > 1 is asked to train or replay in one process: its
    steps run in a process group (protocol.node.ddp_worker.DdpGroup)."""


@dataclass(frozen=True)
class RoundTask:
    """Who trains what: everything a miner's round (and its replay) depends on besides θ_r."""

    run_seed: bytes
    round: int
    miner: bytes  # the miner's 20-byte address
    model: ModelConfig
    cfg: ComputeConfig

    @property
    def seed(self) -> Digest:
        return miner_seed(self.run_seed, self.round, self.miner)


BatchFn = Callable[[int], tuple[Tensor, Tensor]]  # global step -> (x, y), each (B, T)
StepHook = Callable[[Checkpoint], None]  # the live state after each inner step (copy to keep it)
# after each backward: make this rank's gradients the whole batch's and return the batch's loss
GradSync = Callable[[LanguageModel, Tensor], Tensor]


def task_pages(task: RoundTask, ds: Dataset) -> list[int]:
    """The pages the task's miner must train on: more for a longer round (`pages_for_round`)."""
    cfg = task.cfg
    return assign_pages(ds, task.seed, pages_for_round(ds, cfg.inner_steps, cfg.batch_size, task.model.block_size,
                                                       cfg.pages_per_miner))


def batch_fn(task: RoundTask, ds: Dataset, batch_size: int | None = None,
             pages: list[int] | None = None) -> BatchFn:
    """The task's batches; `batch_size`/`pages` overrides exist only for adversary tests."""
    pages = pages if pages is not None else task_pages(task, ds)
    bs = batch_size if batch_size is not None else task.cfg.batch_size
    return lambda step: batch(ds, task.seed, step, pages, bs, task.model.block_size)


@dataclass(frozen=True)
class Carry:
    """What a miner carries from one round into its next, committed in its trace
    (`proof.carry_hash`): the error-feedback residual, and AdamW's second moment, kept per
    worker as DiLoCo keeps its inner optimizer state. Restarting AdamW from zero every
    round cost veritrain its lead over a worker training alone (benchmarks/VS_DDP.md). The
    first moment restarts from zero: it points along the miner's own old trajectory, which
    the outer step has just moved away from. Zero before a miner's first round and after a
    round it missed."""

    residual: Tensor  # (N,) float32
    second_moment: Params  # exp_avg_sq at the end of the round, name -> float32 tensor


def zero_carry(model: ModelConfig) -> Carry:
    return Carry(torch.zeros(num_params(model)),
                 {k: torch.zeros(s) for k, s in param_shapes(model).items()})


def fresh_checkpoint(task: RoundTask, theta: Params, carry: Carry | None) -> Checkpoint:
    """Leaf 0: θ_r, zero first moment, the carried second moment and error-feedback buffer,
    step 0, seeded RNG. `warm` (no bias correction) follows from the carried moment itself,
    so a verifier re-derives it: it is set iff any of it is non-zero."""
    gen = torch.Generator().manual_seed(seed_int(task.seed, 0) % (1 << 63))
    carry = carry if carry is not None else zero_carry(task.model)
    second = {k: carry.second_moment[k].clone() for k in theta}
    return Checkpoint(
        step=0,
        params={k: v.clone() for k, v in theta.items()},
        exp_avg={k: torch.zeros_like(v) for k, v in theta.items()},
        exp_avg_sq=second,
        rng=gen.get_state(),
        ef=carry.residual.clone(),
        warm=any(bool((t.view(torch.int32) != 0).any()) for t in second.values()),  # bitwise: -0.0 counts, as its digest does
    )


def _adamw(model: LanguageModel, m: Params, v: Params, step: int, cfg: ComputeConfig, warm: bool) -> None:
    adamw_update(model.named_parameters(), m, v, step, cfg, warm)


def adamw_update(named: Iterable[tuple[str, Tensor]], m: Params, v: Params, step: int, cfg: ComputeConfig,
                 warm: bool) -> None:
    """One decoupled-weight-decay Adam update in place of `named` parameters (step is 1-based),
    the whole model's or one pipeline stage's. A warm second moment needs no bias correction; the
    first moment then restarts uncorrected, which eases each round in over ~1/(1-beta1) steps."""
    bc1 = 1.0 if warm else 1 - cfg.beta1**step
    bc2_sqrt = 1.0 if warm else math.sqrt(1 - cfg.beta2**step)
    with torch.no_grad():
        for name, p in named:
            g = p.grad
            assert g is not None
            if p.dim() >= 2:
                p.mul_(1 - cfg.inner_lr * cfg.weight_decay)
            m[name].lerp_(g, 1 - cfg.beta1)
            v[name].mul_(cfg.beta2).addcmul_(g, g, value=1 - cfg.beta2)
            denom = (v[name].sqrt() / bc2_sqrt).add_(cfg.eps)
            p.addcdiv_(m[name], denom, value=-cfg.inner_lr / bc1)


def _live_state(model: LanguageModel, m: Params, v: Params, gen: torch.Generator, step: int,
                warm: bool) -> Checkpoint:
    """The state after `step` steps as a checkpoint on the CPU: the live tensors themselves
    when training runs there (no copy), else copies (hashes are taken of CPU tensors)."""
    params = {k: p.detach().cpu() for k, p in model.named_parameters()}
    return Checkpoint(step, params, _on(m, "cpu"), _on(v, "cpu"), gen.get_state(), None, warm)


def _on(tensors: Params, device: torch.device | str, copy: bool = False) -> Params:
    """`tensors` on `device`: the same tensors when they are there already and `copy` is False."""
    return {k: t.to(device, copy=copy) for k, t in tensors.items()}


def run_steps(model: LanguageModel, start: Checkpoint, n_steps: int, batches: BatchFn,
              cfg: ComputeConfig, on_step: StepHook | None = None,
              consume: bool = False, placement: Placement = CPU,
              sync: GradSync | None = None) -> tuple[Checkpoint, list[float]]:
    """Run n_steps AdamW steps from `start`; returns the end checkpoint and per-step losses.

    `on_step`, if given, sees the full state after every step, the last one included (the
    validator hashes it for its replay witness). Its tensors are live and change with the
    next step: a hook copies what it keeps and must not modify them. `consume`: the caller
    hands `start` over and never reads it again, so its moments are trained in place instead
    of copied (two parameter-sized tensors less in a streamed miner's peak). `placement`: the
    model, moments and batches move to its device once; the checkpoints (and the hook's
    states) are CPU tensors. `sync`: a rank of a process group averages gradients with it
    (`protocol.node.ddp_sync.GatherSync`)."""
    device = placement.torch_device
    model.to(device)
    load_params(model, start.params)
    copy = placement.on_host and not consume  # off the host, moving is the copy
    m, v = _on(start.exp_avg, device, copy), _on(start.exp_avg_sq, device, copy)
    gen = torch.Generator()
    gen.set_state(start.rng)  # carried for stochastic layers (dropout); the presets draw nothing
    losses: list[float] = []
    with lend_generator(model, gen):  # dropout layers draw from the trace's generator
        for i in range(n_steps):
            step = start.step + i
            x, y = batches(step)  # (B, T), (B, T)
            model.zero_grad(set_to_none=True)
            with placement.autocast():
                loss = model(x.to(device), y.to(device))
            loss.backward()
            if sync is not None:
                loss = sync(model, loss)
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip, foreach=False)
            _adamw(model, m, v, step + 1, cfg, start.warm)
            losses.append(float(loss.detach()))
            if on_step is not None:
                on_step(_live_state(model, m, v, gen, step + 1, start.warm))
    end = Checkpoint(
        step=start.step + n_steps,
        params={k: p.detach().to("cpu", copy=True) for k, p in model.named_parameters()},
        exp_avg=_on(m, "cpu"),
        exp_avg_sq=_on(v, "cpu"),
        rng=gen.get_state(),
        ef=None,
        warm=start.warm,
    )
    return end, losses


@dataclass(frozen=True)
class Stepped:
    """What a stepper returns for one run of steps."""

    end: Checkpoint  # CPU tensors
    losses: list[float]  # per step
    step_hashes: tuple[Digest, ...] = ()  # checkpoint hash after each step, when the stepper hashes them


class Stepper(Protocol):
    """Runs `n_steps` inner steps of one task from `start` (in this process, or in a process group)."""

    def __call__(self, start: Checkpoint, n_steps: int, consume: bool = False) -> Stepped: ...


@dataclass
class LocalStepper:
    """`run_steps` in this process. `hash_with`: hash the state after every step (a replay's
    witness needs them); `on_step`: a hook over every step (tests and devnet throttling)."""

    model: LanguageModel
    batches: BatchFn
    cfg: ComputeConfig
    placement: Placement = CPU
    on_step: StepHook | None = None
    hash_with: ModelConfig | None = None
    sync: GradSync | None = None

    def __call__(self, start: Checkpoint, n_steps: int, consume: bool = False) -> Stepped:
        hashes: list[Digest] = []

        def hook(state: Checkpoint) -> None:
            if self.hash_with is not None:
                hashes.append(checkpoint_hash(state, self.hash_with))
            if self.on_step is not None:
                self.on_step(state)

        wants_hook = self.hash_with is not None or self.on_step is not None
        end, losses = run_steps(self.model, start, n_steps, self.batches, self.cfg, hook if wants_hook else None,
                                consume, self.placement, self.sync)
        return Stepped(end, losses, tuple(hashes))


def local_stepper(profile: ReplayProfile, model: LanguageModel, batches: BatchFn, cfg: ComputeConfig,
                  on_step: StepHook | None = None, hash_with: ModelConfig | None = None) -> LocalStepper:
    """A one-process stepper on `profile`'s device and dtype; ProcessGroupRequired for a
    world size above 1."""
    if profile.world_size > 1:
        raise ProcessGroupRequired(f"world size {profile.world_size} trains and replays in a process group, "
                                   "not in one process (protocol.node.ddp_worker.DdpGroup)")
    return LocalStepper(model, batches, cfg, placement_of(profile), on_step, hash_with)


@dataclass(frozen=True)
class TrainedRound:
    checkpoints: list[Checkpoint]  # leaves 0..H/k, at steps 0, k, 2k, ..., H
    losses: list[float]  # H per-step training losses


def train_round(task: RoundTask, ds: Dataset, theta: Params, carry: Carry | None,
                batches: BatchFn | None = None, model: LanguageModel | None = None,
                on_step: StepHook | None = None, placement: Placement = CPU,
                stepper: Stepper | None = None) -> TrainedRound:
    """The miner's honest work for one round (the `batches` override is for adversaries;
    `on_step` is `run_steps`'s hook, over all H steps). `stepper` (a process group's) replaces
    the local one that `model`, `batches`, `on_step` and `placement` describe."""
    if stepper is None:
        model = model if model is not None else build_model(task.model)
        batches = batches if batches is not None else batch_fn(task, ds)
        stepper = LocalStepper(model, batches, task.cfg, placement, on_step)
    ckpts = [fresh_checkpoint(task, theta, carry)]
    losses: list[float] = []
    for _ in range(task.cfg.n_segments):
        run = stepper(ckpts[-1], task.cfg.checkpoint_every)
        ckpts.append(run.end)
        losses += run.losses
    return TrainedRound(ckpts, losses)
