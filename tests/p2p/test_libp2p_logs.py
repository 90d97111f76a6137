"""py-libp2p's log records reach a node's JSON log handler, its routine noise at DEBUG: through
a start, fetch, leave and stop cycle of real hosts, a node's stderr holds only JSON lines."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from protocol.p2p.libp2p_logs import ROUTINE

from .log_cycle import OTHER_WARNING

REPO = Path(__file__).resolve().parents[2]


def test_a_nodes_stderr_holds_only_json_lines_through_start_and_stop(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "tests.p2p.log_cycle", str(tmp_path)], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    records = []
    for line in lines:
        assert line.startswith("{"), f"not a JSON line: {line!r}"
        records.append(json.loads(line))
    # routine records are DEBUG, below the node's level; any other py-libp2p warning is kept
    assert not [r for r in records for _, marker in ROUTINE if marker in r["event"]], records
    kept = [r for r in records if r["event"] == OTHER_WARNING]
    assert [(r["logger"], r["level"]) for r in kept] == [("libp2p.network.swarm", "WARNING")]
