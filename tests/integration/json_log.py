"""Reading a JSON-lines node log (`devnet.log`, a node's log off a terminal) as tests need it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def records(path: Path) -> list[dict[str, Any]]:
    """Every record of the log, in order; a line that is not one JSON object fails the test."""
    out = []
    for line in path.read_text().splitlines():
        record = json.loads(line)
        assert isinstance(record, dict), line
        out.append(record)
    return out


def node_of(record: dict[str, Any]) -> str:
    """`miner0` for the logger `veritrain.miner0`."""
    return str(record["logger"]).removeprefix("veritrain.")
