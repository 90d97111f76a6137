"""`veritrain hardware`: which hardware classes this machine can run, and how fast it trains in each."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

if TYPE_CHECKING:  # it imports torch: not at every command's start
    from protocol.core.hardware.replay_profile import ReplayProfile

MEASURE_SECONDS = 2.0  # timed training per class: enough for a stable tokens/s, short enough to wait for


def _candidates(deployment: Path | None) -> tuple[list[ReplayProfile], list[ReplayProfile], ReplayProfile, Any]:
    """(classes to show, permitted classes, default class, training spec). Without a deployment:
    the default run config's classes and this machine's own classes (its CPU's, and its GPU's
    when it has one)."""
    from protocol.config.run_setup import TrainingSpec, training_spec
    from protocol.core.hardware.hardware_class import own_classes
    from protocol.node.host_probe import this_host

    if deployment is None:
        spec = TrainingSpec(preset="micro")
        shown = [*spec.classes, *(c for c in own_classes(this_host()) if c not in spec.classes)]
        return shown, spec.classes, spec.profile, spec
    from protocol.chain.deployment import load_deployment

    spec = training_spec(load_deployment(deployment).run_config)
    return spec.classes, spec.classes, spec.profile, spec


def class_rows(deployment: Path | None, measure: bool, progress: Any) -> tuple[str, list[dict[str, Any]]]:
    """The model preset, and one row per class: id, label, profile, runnable and why not,
    permitted, default, tokens/s."""
    from dataclasses import asdict

    from protocol.config.run_setup import Setup
    from protocol.core.hardware.hardware_class import class_id, label
    from protocol.node.host_probe import runnable_here

    shown, permitted, default, spec = _candidates(deployment)
    setup = Setup(spec, b"")
    rows = []
    for cls in shown:
        ok, why = runnable_here(cls)
        row = {"id": class_id(cls).hex(), "label": label(cls), "profile": asdict(cls), "runnable": ok, "reason": why,
               "permitted": cls in permitted, "default": cls == default, "tokens_per_s": None}
        if ok and measure and cls.device == "cpu" and cls.world_size == 1:  # timed in one CPU worker
            progress(f"measuring {row['label']} ({MEASURE_SECONDS:.0f} s of {spec.preset} training)")
            row["tokens_per_s"] = _measure(cls, setup)
        rows.append(row)
    return spec.preset, rows


def _measure(cls: ReplayProfile, setup: Any) -> float | None:
    from protocol.core.hardware.replay_profile import ProfileMismatch
    from protocol.node.throughput import measure_class

    try:
        return round(measure_class(cls, setup.model, setup.compute, MEASURE_SECONDS).tokens_per_s, 1)
    except ProfileMismatch:  # runnable by the checks, yet the worker could not enter it
        return None


def render(console: Console, rows: list[dict[str, Any]], preset: str) -> None:
    table = Table(title=f"hardware classes ({preset} model)")
    table.add_column("id", no_wrap=True)
    table.add_column("class", no_wrap=True)
    table.add_column("runnable", no_wrap=True)
    table.add_column("permitted", no_wrap=True)
    table.add_column("tokens/s", justify="right", no_wrap=True)
    for r in rows:
        runnable = "[green]yes[/green]" if r["runnable"] else "[red]no[/red]"
        permitted = ("default" if r["default"] else "yes") if r["permitted"] else "no (own)"
        speed = "—" if r["tokens_per_s"] is None else f"{r['tokens_per_s']:,.0f}"
        table.add_row(r["id"][:8], r["label"], runnable, permitted, speed)
    console.print(table)
    for r in rows:  # below the table: reasons are too long for a column in 80 characters
        if not r["runnable"]:
            console.print(f"{r['id'][:8]} {r['label']} cannot run here: {r['reason']}", highlight=False)


def hardware(
    deployment: Annotated[Path | None, typer.Option(help="Deployment file: show its permitted classes "
                                                         "(default: the default run config's)")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object with stable keys instead of a table")] = False,
    measure: Annotated[bool, typer.Option("--measure/--no-measure",
                                          help="Time a few training steps in each runnable class")] = True,
    stages: Annotated[int | None, typer.Option(min=0, help="Split an unstaged run's model into this many "
                                                           "pipeline stages and say which this machine can hold "
                                                           "(a staged run shows its own stages)")] = None,
) -> None:
    """Show the hardware classes this machine can run: id, label, why not, permitted, tokens/s."""
    from protocol.cli.app import _progress, console
    from protocol.cli.hardware_stages import render_stages, stage_count, stage_rows
    from protocol.core.hardware.hardware_class import label
    from protocol.node.host_probe import available_memory, runnable_here, this_host

    shown, _, _, spec = _candidates(deployment)
    available = available_memory()
    count = stage_count(spec, stages)
    runnable = {label(c) for c in shown if runnable_here(c)[0]}
    split = stage_rows(spec, count, available, runnable) if count else None  # a bad count fails before measuring
    preset, rows = class_rows(deployment, measure, _progress)
    if as_json:
        host = vars(this_host())
        print(json.dumps({"deployment": None if deployment is None else str(deployment), "host": host,
                          "preset": preset, "classes": rows, "available_memory": available, "stages": split},
                         indent=2, sort_keys=True))
        return
    render(console, rows, preset)
    if split is not None:
        render_stages(console, split, preset, available)


def install(app: typer.Typer, wrap: Any) -> None:
    app.command()(wrap(hardware))
