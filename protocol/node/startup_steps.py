"""What a starting node tells its operator: each start-up step as it begins, as one log line
`starting: STEP` (text on a terminal, JSON elsewhere). Never a spinner: a spinner redrawn on
stderr overwrote the log lines written between its redraws."""

from __future__ import annotations

import logging
from typing import Any

from protocol.node.logs import kv


class StartupSteps:
    def __init__(self, log: logging.Logger) -> None:
        self.log = log

    def step(self, what: str, **fields: Any) -> None:
        """`what` begins now (the one before it is done)."""
        self.log.info("starting: %s %s", what, kv(**fields))
