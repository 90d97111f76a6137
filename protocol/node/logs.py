"""Structured log lines: one logger per node under `veritrain.`, key=value fields."""

from __future__ import annotations

import logging
from typing import Any


def get_logger(name: str) -> logging.Logger:
    return logging.getLogger(f"veritrain.{name}")


def quiet_noisy_loggers() -> None:
    """Libraries log at INFO what a node operator does not need; keep their warnings."""
    for noisy in ("libp2p", "multiaddr", "web3", "urllib3", "trio", "asyncio", "eth", "eth_tester", "py.warnings",
                  "protocol.p2p"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    # a dial to a peer that went away is routine (the p2p layer tries the next one)
    logging.getLogger("libp2p.transport.tcp").setLevel(logging.CRITICAL)
    # so is a connection the admission gate drops after Noise (a peer not yet, or no longer,
    # staked): py-libp2p logs each as an error in the muxer negotiation that follows
    logging.getLogger("libp2p.protocol_muxer.multiselect_client").setLevel(logging.CRITICAL)


def kv(**fields: Any) -> str:
    """key=value pairs for structured log lines."""
    return " ".join(f"{k}={v}" for k, v in fields.items())
