"""Table and plot for `python -m benchmarks vs-ddp` (reads only the result dict)."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.table import Table

from benchmarks.ddp_baseline import Curve
from benchmarks.vs_ddp import LINKS, sim_times


def _fmt(v: object) -> str:
    if v is None:
        return "null"
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def print_tables(result: dict) -> None:
    console = Console(width=150)
    vt = result["veritrain"]
    for key, run in vt.items():
        t = Table(title=f"vs DDP — veritrain {key} setting: {run['arm']}")
        for col in ("figure", "value", "target"):
            t.add_column(col, justify="right")
        for name, value in run["figures"].items():
            t.add_row(name, _fmt(value), result["targets"].get(name, ""))
        for name, value in run["extra"].items():
            t.add_row(name, _fmt(value), "")
        console.print(t)
    ddp = result["ddp"]
    console.print(f"DDP lr sweep: {ddp['lr_sweep']} -> lr {ddp['lr']:g}; "
                  f"ranks synchronized: {len(set(ddp['params_hashes'])) == 1}; "
                  f"runtime {result['runtime_s']:.0f} s")
    if result["sweep"]:
        _sweep_tables(console, result["sweep"])


def _sweep_tables(console: Console, sw: dict) -> None:
    for rung in sw["rungs"]:
        t = Table(title=f"sweep rung at {rung['budget_steps']} steps per worker")
        for col in ("arm", "held-out loss", "loss_gap", "bytes_ratio", "eligible", "pareto"):
            t.add_column(col, justify="right")
        front = {r["arm"] for r in sw["pareto_front"][str(rung["budget_steps"])]}
        for r in rung["rows"]:
            t.add_row(r["arm"], f"{r['loss']:.4f}", f"{r['loss_gap']:+.3f}",
                      f"{r['bytes_ratio']:.0f}", "yes" if r["eligible"] else "no",
                      "*" if r["arm"] in front else "")
        console.print(t)
    console.print(f"best eligible setting: {sw['best']['arm'] if sw['best'] else None}")


def _series(result: dict) -> list[tuple[str, Curve, float, float, str]]:
    """(label, curve, compute s per step, syncs per step, style) for each side."""
    timing = result["veritrain"]["default"]["timing"]
    out = [(f"DDP (lr {result['ddp']['lr']:g})", Curve(**result["ddp"]["curve"]),
            timing["ddp_step_s"], 1.0, "k-"),
           ("single worker", Curve(**result["single"]["curve"]), timing["ddp_step_s"], 0.0, "g:")]
    for key, style in (("default", "b-"), ("best", "r--")):
        run = result["veritrain"].get(key)
        if run:
            h = run["setting"]["inner_steps"]
            out.append((f"veritrain {run['arm']}", Curve(**run["curve"]),
                        run["timing"]["vt_round_s"] / h, 1 / h, style))
    return out


def plot(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cfg = result["config"]
    tok = cfg["tokens_per_worker_step"] / 1e6  # M tokens per worker step (x W for all workers)
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.8))
    target = result["ddp"]["curve"]["loss"][-1]
    for label, c, step_s, syncs, style in _series(result):
        axes[0].plot([s * tok for s in c.steps], c.loss, style, label=label)
        for ax, bw in zip(axes[1:], LINKS.values(), strict=True):
            ax.plot(sim_times(c, step_s, syncs, bw), c.loss, style, label=label)
    axes[0].set_xlabel(f"tokens per worker (M; DDP and veritrain: x{cfg['workers']} in all)")
    for ax, name in zip(axes[1:], LINKS, strict=True):
        ax.set_xlabel(f"simulated time per worker at {name} (s, log)")
        ax.set_xscale("log")
    for ax in axes:
        ax.axhline(target, color="grey", lw=0.6, ls="--")
        ax.set_ylabel("held-out loss")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(f"veritrain vs DDP, tiny GPT, W={cfg['workers']}, B={cfg['ddp_steps']} DDP steps"
                 f"{' (quick)' if cfg['quick'] else ''}; dashed: DDP final loss")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
