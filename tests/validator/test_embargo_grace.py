"""Validators ask again for a submission the miner does not serve yet: a miner lifts its
embargo when it sees the commit phase close, which may be a poll after the validator did."""

from __future__ import annotations

from pathlib import Path

import pytest

from protocol.node.node_config import NodeConfig
from validator import checks


class LateMiner:
    """`NodeContext.fetch_blob` of a miner that serves from its `serves_from`-th request on."""

    def __init__(self, serves_from: int | None) -> None:
        self.serves_from, self.calls = serves_from, 0
        self.config = NodeConfig(data_dir=Path("unused"), poll_s=0.01)  # the node's own settings, as the CLI builds them

    async def fetch_blob(self, blob_hash: bytes, kind: str, first: str | None = None) -> bytes | None:
        self.calls += 1
        return b"envelope" if self.serves_from is not None and self.calls >= self.serves_from else None


@pytest.mark.trio
async def test_a_miner_that_lifts_its_embargo_a_poll_late_is_still_fetched():
    ctx = LateMiner(serves_from=3)
    assert await checks.fetch_envelope(ctx, b"\x01" * 32, "0xminer") == b"envelope"  # type: ignore[arg-type]
    assert ctx.calls == 3


@pytest.mark.trio
async def test_a_submission_never_served_is_unavailable_after_the_grace(monkeypatch):
    monkeypatch.setattr(checks, "EMBARGO_GRACE_S", 0.05)
    ctx = LateMiner(serves_from=None)
    assert await checks.fetch_envelope(ctx, b"\x01" * 32, "0xminer") is None  # type: ignore[arg-type]
    assert ctx.calls >= 2
