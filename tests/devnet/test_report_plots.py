"""The devnet report's plots and settlement table on a small report: whole-round ticks, the
uniform-guess loss ln V as a labelled line, node names the table prints, and a validator's
reputation shown as none rather than 0."""

from __future__ import annotations

import io
import math
from pathlib import Path

import matplotlib
import pytest
from rich.console import Console

from protocol.devnet.report import (
    loss_figure,
    node_names,
    nodes_figure,
    render_settlement,
    write_report,
)

matplotlib.use("Agg")

MINER = "0x" + "a1" * 20
VALIDATOR = "0x" + "b2" * 20


def _node(address: str, role: str, kind: str = "honest", slashed: float = 0.0) -> dict:
    return {"address": address, "role": role, "kind": kind, "stake": 1000.0, "reputation": 0.25 if role == "miner" else 0.0,
            "earned": 10.0, "claimable": 0.0, "claimed": 10.0, "slashed": slashed}


@pytest.fixture
def report() -> dict:
    rounds = [{"round": r, "fallback": False, "heldout_loss": loss, "model_hash": "0x" + "00" * 32, "commit_s": 5,
               "miners": []} for r, loss in enumerate((5.4, 5.1, None, 4.8))]
    final = [_node(MINER, "miner"), _node("0x" + "c3" * 20, "miner", "lazy", slashed=100.0), _node(VALIDATOR, "validator")]
    return {"config": {"vocab_size": 256}, "rounds": rounds, "final": final, "reports": []}


def test_the_loss_plot_has_round_ticks_and_the_uniform_guess_line(report) -> None:
    ax = loss_figure(report).axes[0]
    assert all(float(t).is_integer() for t in ax.get_xticks())
    reference = [line for line in ax.get_lines() if line.get_label().startswith("uniform guess")]
    assert len(reference) == 1 and list(reference[0].get_ydata()) == [math.log(256)] * 2  # axhline: two ends
    assert [t.get_text() for t in ax.get_legend().get_texts()] == \
        ["held-out loss (median revealed)", "uniform guess: ln 256 = 5.55"]


def test_the_nodes_plot_names_nodes_as_the_table_does(report) -> None:
    out = io.StringIO()
    render_settlement(Console(file=out, width=80), report)  # piped: widened, every address whole
    table = out.getvalue()
    names = node_names(report["final"])
    assert names == ["miner0", "miner1", "validator2"]
    for name, node in zip(names, report["final"], strict=True):
        assert any(name in line and node["address"] in line for line in table.splitlines()), table
    fig = nodes_figure(report)
    for ax in fig.axes:
        assert [t.get_text() for t in ax.get_xticklabels()] == names
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["miner", "validator", "slashed"]
    reputation = fig.axes[2]
    assert reputation.get_title() == "reputation (miners only)"
    assert math.isnan(reputation.patches[2].get_height())  # no bar for the validator


def test_a_validator_reputation_reads_as_none_with_a_note(report) -> None:
    out = io.StringIO()
    render_settlement(Console(file=out, width=80), report)
    row = next(line for line in out.getvalue().splitlines() if VALIDATOR in line)
    assert "—" in row and "0.000" not in row
    assert "validators have none" in out.getvalue()


def test_write_report_draws_both_plots(report, tmp_path: Path) -> None:
    paths = write_report(report, tmp_path)
    assert [p.name for p in paths] == ["report.json", "heldout_loss.png", "nodes.png"]
    assert all(p.stat().st_size > 1000 for p in paths[1:])
