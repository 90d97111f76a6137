"""What a starting node tells its operator: each start-up step as it begins.

On a terminal the current step shows as a spinner and each finished step stays as a line;
otherwise (a file, journald, a log shipper) every step is one log line `starting: STEP`.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

from protocol.node.logs import kv


class StartupSteps:
    def __init__(self, log: logging.Logger, live: bool | None = None) -> None:
        self.log = log
        self.live = sys.stderr.isatty() if live is None else live
        self._status: Any = None
        self._current: str | None = None

    def step(self, what: str, **fields: Any) -> None:
        """`what` begins now (the one before it is done)."""
        detail = " ".join(f"{k}={v}" for k, v in fields.items())
        if not self.live:
            self.log.info("starting: %s %s", what, kv(**fields))
            return
        self._finish_current()
        self._current = f"{what} {detail}".strip()
        if self._status is None:
            from rich.console import Console

            self._status = Console(stderr=True).status(self._current)
            self._status.start()
        else:
            self._status.update(self._current)

    def done(self) -> None:
        """Start-up is over (the node is up, or it stopped): the spinner goes away."""
        self._finish_current()
        if self._status is not None:
            self._status.stop()
            self._status = None

    def _finish_current(self) -> None:
        if self._status is not None and self._current is not None:
            self._status.console.print(f"[green]✓[/green] {self._current}", highlight=False)
        self._current = None
