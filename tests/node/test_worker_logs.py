"""A worker process writes to its node's stderr: a warning raised in it (torch warns there) comes
out as one of the node's JSON lines, not as raw text between them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SCRIPT = """
import warnings
from protocol.core.hardware.replay_profile import ReplayProfile
from protocol.node.worker_pool import ProfileWorker
with ProfileWorker(ReplayProfile()) as worker:
    worker.call(warnings.warn, "a warning raised in the worker")
"""


def test_a_warning_in_a_worker_is_a_json_line_off_a_terminal() -> None:
    env = {**os.environ, "VERITRAIN_LOG_FORMAT": "auto"}  # stderr is a pipe here: JSON lines
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=120,
                          cwd=Path(__file__).resolve().parents[2])
    assert proc.returncode == 0, proc.stderr
    records = [json.loads(line) for line in proc.stderr.splitlines()]  # every line is JSON
    warned = [r for r in records if "a warning raised in the worker" in r["event"]]
    assert len(warned) == 1 and warned[0]["logger"] == "py.warnings" and warned[0]["level"] == "WARNING", records
