"""py-libp2p's log records into the node's own handlers, its routine shutdown noise at DEBUG.

Importing libp2p (with `LIBP2P_DEBUG` unset) clears the `libp2p` logger's handlers and turns
its propagation off, so every warning py-libp2p logs goes to `logging.lastResort`: raw text on
stderr, between a node's JSON lines. `route_libp2p_logs` turns propagation back on, so its
records reach the handlers the node installed (JSON lines off a terminal) at the levels the
node set, and demotes to DEBUG the records py-libp2p logs, as warnings and errors with
tracebacks, for routine events."""

from __future__ import annotations

import logging
import os

# (logger, a text only its routine record holds): logged at DEBUG instead
ROUTINE = (
    # a connection that failed while being added (the host stopping, the peer leaving mid-setup:
    # "Connection closed while starting"): py-libp2p logs each with its traceback, and raises it
    # to the dialer, which redials with backoff, or drops the inbound connection
    ("libp2p.network.swarm", "[ADDCONN_FAIL]"),
    # the same peer leaving between the muxer's start and its establishment
    ("libp2p.network.swarm", "muxer event_started set but is_established=False"),
    # a stream opened to a peer that has just left (the caller gets a typed error)
    ("libp2p.host.basic_host", "handshake read failed"),
)


class DemoteRoutine(logging.Filter):
    """Lowers a record holding `marker` to DEBUG, shown only where its logger allows DEBUG."""

    def __init__(self, marker: str) -> None:
        super().__init__()
        self.marker = marker

    def filter(self, record: logging.LogRecord) -> bool:
        if self.marker not in record.getMessage():
            return True
        record.levelno, record.levelname = logging.DEBUG, logging.getLevelName(logging.DEBUG)
        return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)


def route_libp2p_logs() -> None:
    """Idempotent; called whenever a host is built (libp2p is imported by then)."""
    if os.environ.get("LIBP2P_DEBUG"):
        return  # py-libp2p's own debug logging was asked for: its handlers stay
    logging.getLogger("libp2p").propagate = True
    for name, marker in ROUTINE:
        logger = logging.getLogger(name)
        if not any(isinstance(f, DemoteRoutine) and f.marker == marker for f in logger.filters):
            logger.addFilter(DemoteRoutine(marker))
