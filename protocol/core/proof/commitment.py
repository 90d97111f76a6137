"""A miner's commit for a round, as the chain records it (`Rounds.UpdateCommitted`)."""

from __future__ import annotations

from typing import NamedTuple


class Commit(NamedTuple):
    update_hash: bytes  # content hash of the committed envelope
    trace_root: bytes  # Merkle root of its training trace
    column: int  # its commit order: column i of every score vector
    steps: int  # inner steps it trained (capacity-scaled work); 0 stands for the run's H
