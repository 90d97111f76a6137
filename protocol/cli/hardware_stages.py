"""`veritrain hardware` on a staged run, or with `--stages S`: the stages of the run's model, what
each needs to train (`stage_memory.py`'s estimate), which hardware classes it permits, and whether
this machine can hold it: the estimate fits its available memory and it runs a permitted class."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table


def stage_count(spec: Any, asked: int | None) -> int:
    """The stages to show: the run's, or the `--stages` asked for an unstaged run (0: none)."""
    from protocol.core.errors import ConfigError

    if asked is None or asked == spec.stages:
        return int(spec.stages)
    if spec.stages:
        raise ConfigError(f"this run is split into {spec.stages} stages ([training] stages); --stages {asked} "
                          f"does not apply to it: drop --stages")
    return asked


def stage_rows(spec: Any, stages: int, available: int | None, runnable: set[str]) -> list[dict[str, Any]]:
    """One row per stage: blocks, parameters, estimated bytes, whether it fits (None: unknown),
    its permitted classes and whether this machine runs one of them (`runnable`: class labels)."""
    from protocol.config.run_setup import Setup
    from protocol.core.hardware.hardware_class import label
    from protocol.core.pipeline.stage_memory import stage_memory
    from protocol.core.pipeline.stage_split import split_model

    setup = Setup(spec, b"")
    split = split_model(setup.model, stages)
    rows = []
    for s, size in enumerate(split.sizes(setup.model)):
        need = stage_memory(setup.model, split, s, setup.compute.batch_size)
        classes = [label(c) for c in (setup.stage_classes(s) if spec.stages else setup.classes)]
        fits = None if available is None else need.total <= available
        class_here = any(c in runnable for c in classes)
        rows.append({"stage": s, "blocks": [split.blocks[s].start, split.blocks[s].stop - 1], "params": size,
                     "bytes": need.total, "activation_bytes": need.activations, "fits": fits,
                     "classes": classes, "class_here": class_here, "holds": bool(fits) and class_here})
    return rows


def render_stages(console: Console, rows: list[dict[str, Any]], preset: str, available: int | None) -> None:
    free = "unknown" if available is None else f"{available / 2**30:.1f} GiB"
    table = Table(title=f"{preset} model in {len(rows)} stages (this machine has {free} available)")
    for column in ("stage", "blocks", "parameters", "memory to train", "fits here", "class here"):
        table.add_column(column, justify="right", no_wrap=True)
    for r in rows:
        fits = "—" if r["fits"] is None else _yes_no(r["fits"])
        table.add_row(str(r["stage"]), f"{r['blocks'][0]}–{r['blocks'][1]}", f"{r['params']:,}",
                      f"{r['bytes'] / 2**20:,.0f} MiB", fits, _yes_no(r["class_here"]))
    console.print(table)
    console.print("memory to train: parameters, gradients, AdamW moments and one batch of activations "
                  "(an estimate; docs/BENCHMARKS.md §12 measures it); class here: this machine runs one "
                  "of the stage's permitted classes", highlight=False)
    held = [str(r["stage"]) for r in rows if r["holds"]]
    console.print(f"this machine can hold stage {', '.join(held)}" if held else
                  "this machine can hold no stage of this run", highlight=False)


def _yes_no(flag: bool) -> str:
    return "[green]yes[/green]" if flag else "[red]no[/red]"
