"""Structured log lines: one logger per node under `veritrain.`, key=value fields."""

from __future__ import annotations

import logging
from typing import Any


def get_logger(name: str) -> logging.Logger:
    return logging.getLogger(f"veritrain.{name}")


def quiet_noisy_loggers() -> None:
    """Libraries log at INFO what a node operator does not need; keep their warnings. Python
    `warnings` become records of the `py.warnings` logger, so they reach the node's handlers
    (one JSON line each off a terminal) instead of raw text on stderr between the JSON lines."""
    logging.captureWarnings(True)
    for noisy in ("libp2p", "multiaddr", "web3", "urllib3", "trio", "asyncio", "eth", "eth_tester", "py.warnings",
                  "protocol.p2p"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    # a dial to a peer that went away is routine (the p2p layer tries the next one)
    logging.getLogger("libp2p.transport.tcp").setLevel(logging.CRITICAL)
    # so is a connection the admission gate drops after Noise (a peer not yet, or no longer,
    # staked): py-libp2p logs each as an error in the muxer negotiation that follows
    logging.getLogger("libp2p.protocol_muxer.multiselect_client").setLevel(logging.CRITICAL)


class Fields(str):
    """The `key=value ...` text of a log line's fields, still holding the fields themselves,
    so a JSON formatter (json_logs.py) writes them as fields rather than as one string."""

    fields: dict[str, Any]

    def __new__(cls, fields: dict[str, Any]) -> Fields:
        text = super().__new__(cls, " ".join(f"{k}={v}" for k, v in fields.items()))
        text.fields = fields
        return text

    def __reduce__(self) -> tuple[type[Fields], tuple[dict[str, Any]]]:
        return Fields, (self.fields,)  # copied or pickled (a QueueHandler's record): fields kept


def kv(**fields: Any) -> Fields:
    """key=value pairs for structured log lines (as text, and as fields for JSON lines)."""
    return Fields(fields)
