"""A node's stderr off a terminal is JSON lines only: a Python warning is one of them."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import REPO

SCRIPT = """
import io, logging, sys, warnings
from protocol.node.json_logs import LogFormat, stream_handler
from protocol.node.logs import quiet_noisy_loggers
logging.basicConfig(level=logging.INFO, handlers=[stream_handler(sys.stderr, LogFormat.JSON)])  # as `veritrain miner`
quiet_noisy_loggers()
warnings.warn("a library's warning", UserWarning)
logging.getLogger("veritrain.miner").info("after")
"""


def test_a_python_warning_is_a_json_line() -> None:
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    records = [json.loads(line) for line in lines]  # fails on a raw `UserWarning: ...` line
    assert [r["logger"] for r in records] == ["py.warnings", "veritrain.miner"], lines
    assert records[0]["level"] == "WARNING" and "a library's warning" in records[0]["event"]
