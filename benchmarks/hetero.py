"""Capacity-scaled work on mixed hardware: fixed H steps vs steps that fit the window.

    python -m benchmarks hetero [--quick] [--json PATH] [--windows N]

Four miners train the `micro` preset for real, in one process (no chain, no p2p): two "fast"
ones and two "slow" ones at a third of the speed. Each round every miner that commits trains
from θ_r with its own `RoundTask` (config `cfg.with_steps(S)`, its error-feedback residual and
second moment carried as the protocol carries them, restarted after a missed round),
`build_work` derives its update, and `aggregate` weights the updates by the steps trained.

Time is simulated, nothing sleeps. The bare seconds per inner step t is measured once
(`time_steps`); a fast miner's step takes t, a slow one's 3t. The commit window W is sized so
that a fast miner's H steps fill 40% of it and a slow miner's H steps 120%: W = H t / 0.4.
Both arms get the same simulated wall budget (N windows):
  - fixed: every miner trains H; one whose training outlasts W misses the round (no update,
    no checks, no pay) and the commit phase runs to the deadline, so the round lasts W;
  - scaled: each miner trains `steps_for_window(cfg, its step time, 0.5 W)` (the miner
    node's capacity_margin 0.5), everyone commits, and the phase closes once the last one
    has, so the round lasts the slowest miner's training time.
A round that would cross the budget is not started. With V validators every committed miner
is checked V times a round. Counts of steps, rounds and misses do not depend on t (it only
turns them into seconds); the held-out loss is measured at the end of the equal budget.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from rich.console import Console
from rich.table import Table

from benchmarks.ddp_baseline import Spec, dataset, heldout, heldout_loss, miner_address
from protocol.core.aggregation.state import GlobalState, aggregate, genesis_state
from protocol.core.model.gpt import LanguageModel, build_model, load_params, preset
from protocol.core.proof.work import build_work
from protocol.core.train.capacity import steps_for_window
from protocol.core.train.compute_config import ComputeConfig
from protocol.core.train.data import Dataset
from protocol.core.train.training import Carry, RoundTask, train_round
from protocol.node.throughput import time_steps

CLASSES = ("fast", "fast", "slow", "slow")  # miner i's hardware class
SLOWDOWN = {"fast": 1.0, "slow": 3.0}  # step time in units of the measured t
FAST_SHARE = 0.4  # a fast miner's H steps fill this share of W (a slow one's: 3 x 0.4 = 120%)
MARGIN = 0.5  # share of the window a miner plans to use (miner node's capacity_margin)
VALIDATORS = 2  # every validator checks every committed miner
ARMS = ("fixed", "scaled")
DEFAULT_JSON = Path(__file__).resolve().parent / "results" / "hetero.json"


@dataclass(frozen=True)
class Setup:
    spec: Spec  # preset, corpus, miners, held-out batches
    cfg: ComputeConfig
    seconds_per_step: float  # t: a fast miner's bare inner step
    windows: int  # the wall budget, in commit windows

    @property
    def window_s(self) -> float:
        return self.cfg.inner_steps * self.seconds_per_step / FAST_SHARE

    @property
    def budget_s(self) -> float:
        return self.windows * self.window_s

    def step_time(self, miner: int) -> float:
        return SLOWDOWN[CLASSES[miner]] * self.seconds_per_step


@dataclass(frozen=True)
class Plan:
    """One round on the simulated clock: who trains how many steps, who makes the deadline."""

    steps: tuple[int, ...]  # inner steps per miner
    committed: tuple[bool, ...]  # trained within W
    seconds: float  # how long the round's commit phase lasts


def planned_steps(setup: Setup, arm: str) -> tuple[int, ...]:
    if arm == "fixed":
        return (setup.cfg.inner_steps,) * len(CLASSES)
    return tuple(steps_for_window(setup.cfg, setup.step_time(i), MARGIN * setup.window_s)
                 for i in range(len(CLASSES)))


def plan_round(setup: Setup, steps: tuple[int, ...]) -> Plan:
    """The phase closes early once everyone committed, else at the deadline W."""
    seconds = [s * setup.step_time(i) for i, s in enumerate(steps)]
    committed = tuple(s <= setup.window_s for s in seconds)
    return Plan(steps, committed, max(seconds) if all(committed) else setup.window_s)


@dataclass
class ArmRun:
    arm: str
    state: GlobalState
    carry: list[Carry | None]  # per miner; None before its first round and after a miss
    clock: float = 0.0  # simulated seconds spent
    rounds: int = 0
    tokens: list[int] = field(default_factory=list)  # tokens trained, per round
    missed: list[int] = field(default_factory=lambda: [0] * len(CLASSES))  # per miner
    checks: list[int] = field(default_factory=lambda: [0] * len(CLASSES))  # per miner
    pay: list[float] = field(default_factory=lambda: [0.0] * len(CLASSES))  # token-weighted
    curve: list[tuple[float, float]] = field(default_factory=list)  # (windows, held-out loss)


def miner_work(setup: Setup, run: ArmRun, miner: int, steps: int, model: LanguageModel,
               ds: Dataset) -> tuple[bytes, Carry]:
    """One miner's honest round from θ_r: train `steps` inner steps, derive the update."""
    spec, theta = setup.spec, run.state.params
    task = RoundTask(spec.run_seed, run.rounds, miner_address(miner), preset(spec.preset),
                     setup.cfg.with_steps(steps))
    work = build_work(task, train_round(task, ds, theta, run.carry[miner], model=model), theta)
    return work.blob, work.carry


def record_pay(run: ArmRun, plan: Plan) -> None:
    """Pay follows steps x quality (validator scoring); quality is taken equal here, so
    this is each miner's share of the round's verified steps."""
    steps = {miner_address(i): s for i, s in enumerate(plan.steps) if plan.committed[i]}
    pay = dict(steps)  # absolute_score at equal quality: proportional to the steps
    total = sum(pay.values())
    for i in range(len(CLASSES)):
        run.pay[i] += pay.get(miner_address(i), 0.0) / total


def play_round(setup: Setup, run: ArmRun, plan: Plan, model: LanguageModel, ds: Dataset) -> None:
    blobs, steps = [], []
    for i, (s, ok) in enumerate(zip(plan.steps, plan.committed, strict=True)):
        if not ok:  # late: its work is never aggregated, so it is not trained here either
            run.missed[i] += 1
            run.carry[i] = None
            continue
        blob, run.carry[i] = miner_work(setup, run, i, s, model, ds)
        blobs.append(blob)
        steps.append(s)
        run.checks[i] += VALIDATORS
    run.state = aggregate(run.state, blobs, preset(setup.spec.preset), setup.cfg, steps=steps)
    run.tokens.append(sum(steps) * setup.spec.tokens_per_step)
    record_pay(run, plan)
    run.clock += plan.seconds
    run.rounds += 1


def evaluate(setup: Setup, run: ArmRun, model: LanguageModel) -> None:
    load_params(model, run.state.params)
    run.curve.append((run.clock / setup.window_s, heldout_loss(model, heldout(setup.spec))))


def run_arm(setup: Setup, arm: str) -> ArmRun:
    """Whole rounds from θ_0 until the next one would cross the wall budget."""
    m, ds = preset(setup.spec.preset), dataset(setup.spec.corpus)
    model = build_model(m)
    run = ArmRun(arm, genesis_state(m, setup.cfg, seed=0), [None] * len(CLASSES))
    plan = plan_round(setup, planned_steps(setup, arm))  # the same every round
    evaluate(setup, run, model)
    while run.clock + plan.seconds <= setup.budget_s * (1 + 1e-9):  # float slack at the edge
        play_round(setup, run, plan, model, ds)
        evaluate(setup, run, model)
    return run


def per_class(values: list[float], rounds: int) -> dict[str, float]:
    """Mean per miner per round, by hardware class."""
    return {c: statistics.fmean(v for v, k in zip(values, CLASSES, strict=True) if k == c) / max(rounds, 1)
            for c in SLOWDOWN}


def arm_json(setup: Setup, run: ArmRun) -> dict[str, Any]:
    plan = plan_round(setup, planned_steps(setup, run.arm))
    return {
        "steps_per_class": {c: s for s, c in zip(plan.steps, CLASSES, strict=True)},
        "round_windows": plan.seconds / setup.window_s,
        "rounds": run.rounds,
        "tokens_per_round": statistics.fmean(run.tokens) if run.tokens else 0.0,
        "tokens_total": sum(run.tokens),
        "rounds_missed": sum(run.missed),
        "rounds_missed_per_miner": run.missed,
        "checks_per_miner_per_round": per_class([float(c) for c in run.checks], run.rounds),
        "pay_share_per_miner_per_round": per_class(run.pay, run.rounds),
        "heldout_loss": run.curve[-1][1],
        "curve": {"windows": [w for w, _ in run.curve], "heldout_loss": [v for _, v in run.curve]},
    }


def measure(quick: bool, windows: int | None = None) -> dict[str, Any]:
    torch.set_num_threads(1)  # as diloco_sim: miners replay single-threaded, so t is one core's
    cfg = ComputeConfig()  # protocol defaults: H=30, k=3, batch 8
    spec = Spec(preset="micro", corpus="slice:600000", workers=len(CLASSES), run_seed=b"hetero",
                base=cfg)
    t = time_steps(preset(spec.preset), cfg, seconds=0.5 if quick else 2.0).seconds_per_step
    setup = Setup(spec, cfg, t, windows or (4 if quick else 30))
    arms = {a: arm_json(setup, run_arm(setup, a)) for a in ARMS}
    figures: dict[str, Any] = {}
    for key in ("tokens_per_round", "rounds_missed", "heldout_loss", "rounds", "tokens_total"):
        for a in ARMS:
            figures[f"{key}_{a}"] = arms[a][key]
    figures["checks_per_miner_per_round"] = {a: arms[a]["checks_per_miner_per_round"] for a in ARMS}
    figures["pay_share_per_miner_per_round"] = {a: arms[a]["pay_share_per_miner_per_round"] for a in ARMS}
    figures["seconds_per_step"] = t
    figures["config"] = {
        "preset": spec.preset, "corpus": spec.corpus, "classes": list(CLASSES),
        "slowdown": SLOWDOWN, "inner_steps": cfg.inner_steps, "checkpoint_every": cfg.checkpoint_every,
        "min_steps": cfg.min_steps, "batch_size": cfg.batch_size,
        "block_size": preset(spec.preset).block_size, "fast_share_of_window": FAST_SHARE,
        "window_s": setup.window_s, "windows": setup.windows, "budget_s": setup.budget_s,
        "margin": MARGIN, "validators": VALIDATORS,
    }
    return {"figures": figures, "arms": arms}


def table(result: dict[str, Any]) -> Table:
    arms, cfg = result["arms"], result["figures"]["config"]
    out = Table(title=f"capacity-scaled vs fixed work: 2 fast + 2 slow (1/3x) miners, "
                      f"{cfg['windows']} windows of {cfg['window_s']:.2f} s")
    out.add_column("")
    for a in ARMS:
        out.add_column(a, justify="right")
    rows: list[tuple[str, Any]] = [
        ("steps fast / slow", lambda r: f"{r['steps_per_class']['fast']} / {r['steps_per_class']['slow']}"),
        ("round length (windows)", lambda r: f"{r['round_windows']:.2f}"),
        ("rounds run", lambda r: str(r["rounds"])),
        ("tokens per round", lambda r: f"{r['tokens_per_round']:,.0f}"),
        ("tokens total", lambda r: f"{r['tokens_total']:,}"),
        ("rounds missed", lambda r: str(r["rounds_missed"])),
        ("checks / miner / round fast, slow", lambda r: "{fast:.1f}, {slow:.1f}".format(**r["checks_per_miner_per_round"])),
        ("pay share / miner / round fast, slow", lambda r: "{fast:.3f}, {slow:.3f}".format(**r["pay_share_per_miner_per_round"])),
        ("held-out loss at the end", lambda r: f"{r['heldout_loss']:.4f}"),
    ]
    for label, cell in rows:
        out.add_row(label, *[cell(arms[a]) for a in ARMS])
    return out


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks hetero")
    ap.add_argument("--quick", action="store_true", help="a 4-window budget (default 30)")
    ap.add_argument("--windows", type=int, default=None, help="wall budget in commit windows")
    ap.add_argument("--json", type=Path, default=DEFAULT_JSON, help="write the results here")
    args = ap.parse_args(argv)
    started = time.perf_counter()
    result = measure(args.quick, args.windows)
    Console().print(table(result))
    fig = result["figures"]
    print(f"seconds_per_step t = {fig['seconds_per_step'] * 1e3:.2f} ms  "
          f"(real run time {time.perf_counter() - started:.0f} s)")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=2))
    print(f"wrote {args.json}")
    return 0
