"""veritrain's side of vs-DDP: W miners on the protocol's real code path, in one process.

Each round every miner trains with `train_round` (inner AdamW, a checkpoint every k steps),
derives its update with `build_work` (Δ = θ_r − θ_H compressed with top-k, 2-bit values and
error feedback, plus the trace), and the next global state is `aggregate` (decode, norm clip,
sparse trimmed mean, outer step). Chain and p2p are left out; the bytes they would carry are
counted instead: with the all-gather of §4.7 each miner sends its blob to W − 1 peers and
receives the W − 1 other blobs.

A `VtRun` is resumable (successive halving pauses and continues it) and picklable, so runs
travel between the sweep's worker processes.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from dataclasses import dataclass, field

import torch

from benchmarks.ddp_baseline import Curve, Spec, dataset, heldout, heldout_loss, miner_address
from benchmarks.overhead import bare_round
from protocol.core.aggregation.state import GlobalState, aggregate, genesis_state
from protocol.core.model.gpt import LanguageModel, build_model, load_params, preset
from protocol.core.proof.work import build_work
from protocol.core.train.compute_config import ComputeConfig
from protocol.core.train.training import Carry, RoundTask, batch_fn, train_round


@dataclass(frozen=True)
class Arm:
    """One veritrain setting: H, k, top-k per chunk and the outer optimizer."""

    inner_steps: int  # H
    checkpoint_every: int  # k
    topk: int  # values kept per chunk
    outer_lr: float
    outer_momentum: float = 0.0  # 0 = plain averaging (outer SGD)
    nesterov: bool = False
    inner_lr: float = ComputeConfig.inner_lr  # miners' AdamW learning rate
    bits: int = ComputeConfig.bits  # value quantization of the update: 2 or 8

    def config(self, base: ComputeConfig) -> ComputeConfig:
        return dataclasses.replace(base, inner_steps=self.inner_steps,
                                   checkpoint_every=self.checkpoint_every, topk=self.topk,
                                   outer_lr=self.outer_lr, outer_momentum=self.outer_momentum,
                                   nesterov=self.nesterov, inner_lr=self.inner_lr,
                                   bits=self.bits)

    @property
    def outer(self) -> str:
        if self.outer_momentum == 0:
            return "avg"
        return ("nesterov" if self.nesterov else "momentum") + f" {self.outer_momentum:g}"

    @property
    def name(self) -> str:
        bits = "" if self.bits == 2 else f" {self.bits}bit"
        return (f"H{self.inner_steps}/k{self.checkpoint_every} top{self.topk}{bits} "
                f"{self.outer} lr{self.outer_lr:g} inner{self.inner_lr:g}")

    @staticmethod
    def of(cfg: ComputeConfig) -> Arm:
        return Arm(cfg.inner_steps, cfg.checkpoint_every, cfg.topk, cfg.outer_lr,
                   cfg.outer_momentum, cfg.nesterov and cfg.outer_momentum > 0, cfg.inner_lr,
                   cfg.bits)


@dataclass(eq=False)  # runs compare by identity (they hold tensors)
class VtRun:
    arm: Arm
    state: GlobalState | None = None  # global θ (+ outer momentum) after `rounds` rounds
    carry: list[Carry | None] = field(default_factory=list)  # per miner: residual, 2nd moment
    rounds: int = 0
    curve: Curve = field(default_factory=Curve)  # x = inner steps per miner
    sent: list[int] = field(default_factory=list)  # cumulative bytes sent, per miner
    recv: list[int] = field(default_factory=list)  # cumulative bytes received, per miner
    blob_bytes: list[int] = field(default_factory=list)  # last round's blob sizes

    @property
    def steps(self) -> int:
        return self.rounds * self.arm.inner_steps


def _count_bytes(run: VtRun, blobs: list[bytes]) -> None:
    """All-gather: miner i sends its blob to W − 1 peers and receives every other blob."""
    sizes = [len(b) for b in blobs]
    for i, size in enumerate(sizes):
        run.sent[i] += size * (len(sizes) - 1)
        run.recv[i] += sum(sizes) - size
    run.blob_bytes = sizes


def _round(run: VtRun, spec: Spec, cfg: ComputeConfig, model: LanguageModel) -> None:
    assert run.state is not None
    m, ds, theta = preset(spec.preset), dataset(spec.corpus), run.state.params
    blobs = []
    for w in range(spec.workers):
        task = RoundTask(spec.run_seed, run.rounds, miner_address(w), m, cfg)
        work = build_work(task, train_round(task, ds, theta, run.carry[w], model=model), theta)
        blobs.append(work.blob)
        run.carry[w] = work.carry  # into the next round
    _count_bytes(run, blobs)
    run.state = aggregate(run.state, blobs, m, cfg)
    run.rounds += 1


def _eval(run: VtRun, spec: Spec, model: LanguageModel) -> None:
    assert run.state is not None
    load_params(model, run.state.params)
    nbytes = (sum(run.sent) + sum(run.recv)) / spec.workers  # per miner, sent + received
    run.curve.add(run.steps, heldout_loss(model, heldout(spec)), nbytes)


def advance(spec: Spec, run: VtRun, to_steps: int) -> VtRun:
    """Train whole rounds until each miner has done at least `to_steps` inner steps."""
    torch.set_num_threads(1)
    cfg, model = run.arm.config(spec.base), build_model(preset(spec.preset))
    if run.state is None:
        run.state = genesis_state(preset(spec.preset), cfg, seed=0)  # θ_0 = DDP's θ_0
        run.carry = [None] * spec.workers
        run.sent, run.recv = [0] * spec.workers, [0] * spec.workers
        _eval(run, spec, model)
    while run.steps < to_steps:
        _round(run, spec, cfg, model)
        _eval(run, spec, model)
    return run


def calibrate(spec: Spec, arm: Arm, trials: int) -> dict[str, float]:
    """Per-worker compute time, paired like `benchmarks overhead`.

    Alternates a bare AdamW loop of H steps (a DDP worker's compute without communication)
    with one veritrain round of a miner: train_round + build_work + aggregating W blobs
    (every miner aggregates). Returns the median bare step time and the median paired ratio.
    """
    torch.set_num_threads(1)
    m, ds, cfg = preset(spec.preset), dataset(spec.corpus), arm.config(spec.base)
    state = genesis_state(m, cfg, seed=0)
    task = RoundTask(spec.run_seed, 0, miner_address(0), m, cfg)
    model, batches = build_model(m), batch_fn(task, ds)
    bare, ratio = [], []
    for i in range(trials + 1):  # trial 0 warms up
        b = bare_round(model, state.params, batches, cfg)
        start = time.perf_counter()
        work = build_work(task, train_round(task, ds, state.params, None, model=model), state.params)
        aggregate(state, [work.blob] * spec.workers, m, cfg)
        v = time.perf_counter() - start
        if i:
            bare.append(b / cfg.inner_steps)
            ratio.append(v / b)
    return {"ddp_step_s": statistics.median(bare), "vt_over_bare": statistics.median(ratio),
            "vt_round_s": statistics.median(bare) * statistics.median(ratio) * cfg.inner_steps}
