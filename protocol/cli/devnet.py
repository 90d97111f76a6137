"""`veritrain devnet`: a whole network in one process (embedded chain, real libp2p hosts,
training in worker processes), with each round's phase and who has acted printed as it runs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from protocol.config.run_config import ChainParams
from protocol.core.errors import ConfigError
from protocol.core.model.config import PRESETS
from protocol.core.train.compute_config import AGGREGATION_RULES

console = Console()
err_console = Console(stderr=True)
PRESET_NAMES = ", ".join(sorted(PRESETS))


def _progress(message: str) -> None:
    err_console.print(f"[dim]·[/dim] {message}", highlight=False)


def devnet(
    miners: Annotated[int, typer.Option(min=1, max=64, help="Honest miners")] = 4,
    validators: Annotated[int, typer.Option(min=1, max=16, help="Validators (three of equal stake ride out one that never reveals; four also one that withholds its signature)")] = 3,
    rounds: Annotated[int, typer.Option(min=1, max=100, help="Rounds to run")] = 5,
    cheaters: Annotated[str, typer.Option(help="Extra cheating miners: KIND[:FRACTION],... "
                                                "(lazy, fabricate, wrong-data, copy, stale, scale, sign-flip, nan, noise, withhold, "
                                                "withhold-challenger; with --stages: stage-lazy or stage-fork, which take a stage seat)")] = "",
    stages: Annotated[int, typer.Option(min=0, max=32, help="Split the model into this many pipeline stages, each "
                                                           "trained by its own miners over the stage link (0: every "
                                                           "miner trains the whole model; --miners is then ignored)")] = 0,
    pipelines: Annotated[int, typer.Option(min=0, max=16, help="With --stages: stage miners per stage, so this many "
                                                              "pipelines a round")] = 0,
    lazy_validators: Annotated[int, typer.Option(min=0, help="Of the validators, how many never replay "
                                                        "(audits catch them; testing only)")] = 0,
    silent_validators: Annotated[int, typer.Option(min=0, help="Of the validators, how many stay up but never reveal "
                                                          "their scores nor sign results (they earn no dividends; "
                                                          "the others settle without them)")] = 0,
    lying_validators: Annotated[int, typer.Option(min=0, help="Of the validators, how many check honestly but "
                                                         "reveal a wrong score for every miner they pass: one unit "
                                                         "off, or 0 without a report (score audits catch them; "
                                                         "testing only)")] = 0,
    lazy_aggregators: Annotated[int, typer.Option(min=0, help="Of the validators, how many serve a wrong partial "
                                                         "sum on every aggregation-tree node they are drawn for; "
                                                         "the run goes on past --rounds (8 rounds at most) until "
                                                         "each has been drawn (needs --fan-in; testing only)")] = 0,
    probe_demands: Annotated[bool, typer.Option(help="The first honest validator also demands one part of every "
                                                     "posted result it agrees with, for the others to answer "
                                                     "(shows the data-availability loop; costs it the bond)")] = False,
    committee: Annotated[int | None, typer.Option(min=0, max=16, help="Seats of each miner's check committee "
                                                              "(default: the run config's, 3): with more "
                                                              "validators than seats, a validator checks only the "
                                                              "miners it holds one of the 2c drawn seats of (0: "
                                                              "every validator checks every miner)")] = None,
    throttled: Annotated[int, typer.Option(min=0, help="Of the honest miners, how many train at a third of the "
                                                   "speed, at most 8 steps a second (they train fewer steps, "
                                                   "not miss rounds)")] = 0,
    miner_classes: Annotated[str, typer.Option(help="Hardware classes the miners run, cycled: LABEL_OR_ID,... "
                                                    "(see `veritrain hardware`; default: the run's profile)")] = "",
    validator_classes: Annotated[str, typer.Option(help="Hardware classes the validators run, cycled; a class "
                                                        "no validator runs is checked in tolerance mode")] = "",
    commit_window: Annotated[int | None, typer.Option(min=10, help="Seconds of each round's commit phase (default "
                                                              "300; 60 with --stages, whose spare stage miners "
                                                              "make a round wait all of it)")] = None,
    absence_rounds: Annotated[int, typer.Option(min=0, max=16, help="Rounds in a row a validator may leave "
                                                "unrevealed before the others end its permit (0: never)")] = 3,
    inner_steps: Annotated[int | None, typer.Option(min=1, help="H: the most inner steps a miner trains per round "
                                                               "(default: the run's 30)")] = None,
    checkpoint_every: Annotated[int | None, typer.Option(min=1, help="k: inner steps per replayed segment "
                                                                    "(default: the run's 3)")] = None,
    aggregation: Annotated[str | None, typer.Option(help=f"Aggregation rule: {', '.join(AGGREGATION_RULES)} "
                                                         "(default: the run's)")] = None,
    top_g: Annotated[int | None, typer.Option(min=1, help="Updates aggregated per round at most, by consensus "
                                                          "(default: the run's)")] = None,
    fan_in: Annotated[int | None, typer.Option(min=0, help="Fan-in of the aggregation tree: drawn validators sum "
                                                           "F updates or partial sums each (exact-sum-v1; 0: "
                                                           "flat, every validator sums every update; default: "
                                                           "the run's)")] = None,
    preset: Annotated[str, typer.Option(help=f"Model preset: micro (fastest), tiny (default), small; all: {PRESET_NAMES}")] = "tiny",
    genesis: Annotated[Path | None, typer.Option(help="Start from this Hugging Face Llama checkpoint folder "
                                                      "(its config replaces the preset's)")] = None,
    dataset: Annotated[Path | None, typer.Option(help="Train on this corpus.bin from `veritrain data pack` (its "
                                                      "vocabulary sizes the model unless --genesis does)")] = None,
    out: Annotated[Path, typer.Option(help="Report folder: report.json, plots, node logs")] = Path("out/devnet"),
    timeout: Annotated[float, typer.Option(help="Fail if the rounds are not done within this many seconds")] = 1800.0,
) -> None:
    """Run a whole network locally: embedded chain, real libp2p hosts, training in worker processes."""
    from protocol.devnet.network import DevnetOptions, parse_cheaters

    _check_counts(miners, validators, lazy_validators, silent_validators, throttled,  # before anything starts
                  lying_validators + lazy_aggregators)
    if lazy_aggregators and not fan_in:
        raise typer.BadParameter("a lazy aggregator needs an aggregation tree: give --fan-in 2 or more",
                                 param_hint="--lazy-aggregators")
    _check_preset(preset, genesis)
    commit_window = commit_window or (60 if stages else 300)
    if bool(stages) != bool(pipelines):
        raise typer.BadParameter("give --stages and --pipelines together (a staged devnet has both)", param_hint="--stages")
    if aggregation is not None and aggregation not in AGGREGATION_RULES:
        raise typer.BadParameter(f"{aggregation!r} is not one of {', '.join(AGGREGATION_RULES)}", param_hint="--aggregation")
    opts = DevnetOptions(miners=miners, validators=validators, rounds=rounds, cheaters=parse_cheaters(cheaters),
                         lazy_validators=lazy_validators, silent_validators=silent_validators,
                         lying_validators=lying_validators, lazy_aggregators=lazy_aggregators, throttled=throttled,
                         probe_demands=probe_demands, preset=preset, out=out,
                         miner_classes=_labels(miner_classes), validator_classes=_labels(validator_classes),
                         timeout_s=timeout, stages=stages, pipelines=pipelines, chain={"commit_duration": commit_window, "absence_rounds": absence_rounds,
                                                   **({} if committee is None else {"committee": committee})},
                         training={**_compute_overrides(inner_steps=inner_steps, checkpoint_every=checkpoint_every,
                                                        aggregation=aggregation),
                                   **({} if top_g is None else {"top_g": top_g}),
                                   **({} if fan_in is None else {"fan_in": fan_in}), **_corpus_tables(dataset, genesis)})
    config = {"miners": miners, "validators": validators, "lazy_validators": lazy_validators,
              "lying_validators": lying_validators, "lazy_aggregators": lazy_aggregators, "fan_in": fan_in,
              "silent_validators": silent_validators, "probe_demands": probe_demands, "rounds": rounds,
              "throttled": throttled, "commit_window": commit_window, "absence_rounds": absence_rounds,
              "committee": ChainParams().committee if committee is None else committee,
              "miner_classes": miner_classes, "validator_classes": validator_classes,
              "cheaters": cheaters, "preset": preset, "aggregation": aggregation, "top_g": top_g,
              "stages": stages, "pipelines": pipelines}
    _run(opts, config)


def _run(opts: Any, config: dict[str, Any]) -> None:
    """Run the network, printing one line per step and phase change, then the settlement."""
    import logging
    import time

    from protocol.devnet.network import DevnetIncomplete, run_config_for, run_devnet
    from protocol.devnet.progress import expected_line
    from protocol.devnet.report import build_report, render_settlement, write_report

    opts.out.mkdir(parents=True, exist_ok=True)
    _log_to(opts.out / "devnet.log")
    log = logging.getLogger("veritrain.devnet")
    began = time.monotonic()

    def progress(line: str) -> None:
        # a new line each time, never redrawn: log lines and these stay readable in a scrollback
        err_console.print(f"[dim]{time.monotonic() - began:5.0f} s[/dim] {line}", highlight=False, soft_wrap=True)
        log.info(line)

    progress(expected_line(run_config_for(opts, []), opts.preset, opts.rounds))
    admin, members, crashed, rounds = run_devnet(opts, progress)
    progress("reading the settlement for the report")
    config = {**config, "chain_id": admin.deployment.chain_id, "contracts": admin.deployment.contracts.model_dump(),
              "crashed": crashed}
    report = build_report(admin, members, config, rounds)
    render_settlement(console, report)
    for path in write_report(report, opts.out):
        console.print(f"wrote {path}")
    if crashed:  # the rounds finished without them, but a crash is a bug worth a failing exit
        raise DevnetIncomplete(f"{len(crashed)} node(s) crashed (traceback in {opts.out / 'devnet.log'}): "
                               + "; ".join(f"{n}: {e}" for n, e in crashed.items()))


def _check_preset(preset: str, genesis: Path | None) -> None:
    """A preset name is checked before anything starts (a genesis checkpoint brings its own model)."""
    if genesis is None and preset not in PRESETS:
        raise ConfigError(f"unknown model preset {preset!r}; choose from {PRESET_NAMES}")


def _check_counts(miners: int, validators: int, lazy: int, silent: int, throttled: int, lying: int = 0) -> None:
    """Refuse counts the devnet cannot make up: no honest validator left, or more throttled than honest
    miners."""
    if lazy + lying >= validators:
        raise ConfigError(f"--lazy-validators ({lazy}) and --lying-validators with --lazy-aggregators ({lying}) "
                          "must leave at least one "
                          f"honest validator of the {validators}")
    if lazy >= validators:
        raise ConfigError(f"--lazy-validators ({lazy}) must leave at least one honest validator of the {validators}")
    if lazy + lying + silent >= validators:
        raise ConfigError(f"--lazy-validators ({lazy}), --lying-validators ({lying}) and --silent-validators "
                          f"({silent}) must leave at least one honest validator of the {validators}")
    if throttled > miners:
        raise ConfigError(f"--throttled ({throttled}) cannot exceed --miners ({miners})")


def _genesis_tables(folder: Path | None) -> dict[str, Any]:
    """`[training.model]` and `[training.genesis]` for a devnet started from a checkpoint."""
    if folder is None:
        return {}
    from protocol.config.run_state import hf_genesis_tables

    _progress(f"genesis: the Hugging Face Llama checkpoint in {folder.expanduser().resolve()}")
    return hf_genesis_tables(folder, {})


def _corpus_tables(dataset: Path | None, genesis: Path | None) -> dict[str, Any]:
    """`[training.dataset]` for a packed corpus and the model tables: the checkpoint's model when
    there is one (deploy checks its vocabulary covers the corpus), else the preset sized to the
    corpus's vocabulary."""
    tables = _genesis_tables(genesis)
    if dataset is None:
        return tables
    from protocol.config.corpus import read_packed_meta

    path = dataset.expanduser().resolve()
    meta = read_packed_meta(path)
    _progress(f"dataset: {path} ({meta.tokens:,} tokens, vocabulary {meta.vocab_size:,})")
    model = tables.get("model", {"vocab_size": meta.vocab_size})
    return {**tables, "model": model, "dataset": {"source": "packed", "path": str(path)}}


def _labels(text: str) -> tuple[str, ...]:
    """`a,b` -> ("a", "b"): the class labels or ids of a comma-separated option."""
    return tuple(item.strip() for item in text.split(",") if item.strip())


def _compute_overrides(**values: int | str | None) -> dict[str, Any]:
    """`[training.compute]` keys for the values given (None: the run's default)."""
    given = {k: v for k, v in values.items() if v is not None}
    return {"compute": given} if given else {}


def _log_to(path: Path) -> None:
    """Node logs go to a file, as JSON lines (one field set per event, as a node's own log off a
    terminal); the terminal shows progress and the final tables."""
    import logging

    from protocol.node.json_logs import JsonFormatter

    handler = logging.FileHandler(path, mode="w")
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    from protocol.node.logs import quiet_noisy_loggers

    quiet_noisy_loggers()


def install(app: typer.Typer, wrap: Any) -> None:
    app.command()(wrap(devnet))
