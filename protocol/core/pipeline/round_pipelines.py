"""A round's pipelines as every node derives them from chain data (docs/PROTOCOL.md §16.3).

The formation seed of round r is keccak256(DOMAIN ‖ run hash ‖ r ‖ the stored seed of round r - 1),
the seed zero for round 0 or a round whose seed nobody stored: the latest randomness the chain holds
when round r opens. A pipeline trains like one miner: its data pages, and so its batches, are those
of its stage-0 miner's address (`pipeline_account`), so two pipelines never train the same pages by
construction of the page draw, and a stage miner's own address decides nothing about its data.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from protocol.core.crypto.keccak import keccak256

DOMAIN = b"veritrain/pipeline-seed/v1"


class Seat(NamedTuple):
    pipeline: int  # its index in the round's formation
    stage: int
    members: tuple[str, ...]  # the pipeline's miners, stage 0 first


def pipeline_seed(run_hash: bytes, round_: int, previous_seed: bytes) -> bytes:
    """Round `round_`'s formation seed; `previous_seed`: round - 1's stored seed (32 zero bytes if none)."""
    if len(run_hash) != 32 or len(previous_seed) != 32:
        raise ValueError("the run hash and the previous seed are 32 bytes each")
    return keccak256(DOMAIN + run_hash + round_.to_bytes(32, "big") + previous_seed)


def seat_of(pipelines: Sequence[tuple[str, ...]], account: str) -> Seat | None:
    """Where `account` trains this round (None: its stage had more miners than the round has pipelines)."""
    for p, members in enumerate(pipelines):
        lowered = [m.lower() for m in members]
        if account.lower() in lowered:
            return Seat(p, lowered.index(account.lower()), tuple(members))
    return None


def pipeline_account(members: Sequence[str]) -> bytes:
    """The 20-byte address whose data pages the pipeline trains: its stage-0 miner's."""
    return bytes.fromhex(members[0][2:])
