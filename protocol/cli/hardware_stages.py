"""`veritrain hardware --stages S`: the stages of the run's model split in S, what each needs to
train (`stage_memory.py`'s estimate) and whether it fits this machine's available memory."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table


def stage_rows(spec: Any, stages: int, available: int | None) -> list[dict[str, Any]]:
    """One row per stage: blocks, parameters, estimated bytes, whether it fits (None: unknown)."""
    from protocol.config.run_setup import Setup
    from protocol.core.pipeline.stage_memory import stage_memory
    from protocol.core.pipeline.stage_split import split_model

    setup = Setup(spec, b"")
    split = split_model(setup.model, stages)
    rows = []
    for s, size in enumerate(split.sizes(setup.model)):
        need = stage_memory(setup.model, split, s, setup.compute.batch_size)
        rows.append({"stage": s, "blocks": [split.blocks[s].start, split.blocks[s].stop - 1], "params": size,
                     "bytes": need.total, "activation_bytes": need.activations,
                     "fits": None if available is None else need.total <= available})
    return rows


def render_stages(console: Console, rows: list[dict[str, Any]], preset: str, available: int | None) -> None:
    free = "unknown" if available is None else f"{available / 2**30:.1f} GiB"
    table = Table(title=f"{preset} model in {len(rows)} stages (this machine has {free} available)")
    for column in ("stage", "blocks", "parameters", "memory to train", "fits here"):
        table.add_column(column, justify="right", no_wrap=True)
    for r in rows:
        fits = "—" if r["fits"] is None else ("[green]yes[/green]" if r["fits"] else "[red]no[/red]")
        table.add_row(str(r["stage"]), f"{r['blocks'][0]}–{r['blocks'][1]}", f"{r['params']:,}",
                      f"{r['bytes'] / 2**20:,.0f} MiB", fits)
    console.print(table)
    console.print("memory to train: parameters, gradients, AdamW moments and one batch of activations "
                  "(an estimate; docs/BENCHMARKS.md §12 measures it)", highlight=False)
