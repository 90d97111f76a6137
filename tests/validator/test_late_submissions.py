"""A validator keeps asking, for part of the score phase, for a submission the miner did not
serve within the embargo grace: a miner restarted mid-round (its worker imports torch first)
serves its journaled work again ~10 s later, and scoring it 0 left honest work unpaid (issue 17)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import trio

from protocol.core.proof.commitment import Commit
from protocol.node.node_config import NodeConfig
from validator import checks, late_submissions
from validator.late_submissions import NOT_SERVED, fetch_late, unserved, wait_until

COMMIT = Commit(b"\x01" * 32, b"\x02" * 32, 0, 0)


class Chain:
    """What `fetch_late` reads: the round's commit close and score deadline, and the clock."""

    def __init__(self, closed: int, deadline: int) -> None:
        self.info = {"commit_closed_time": closed, "score_deadline": deadline}
        self.now = closed

    def round_info(self, r: int) -> dict[str, int]:
        return self.info


class Ctx:
    def __init__(self, chain: Chain) -> None:
        self.chain = chain
        self.client = chain  # `ChainClient.round_info` is the one client read `fetch_late` makes
        self.log = logging.getLogger("test.late")
        self.config = NodeConfig(data_dir=Path("unused"), poll_s=0.0)

    async def port(self, fn, *args):  # type: ignore[no-untyped-def]
        return fn(*args)

    async def next_block_time(self) -> int:
        return self.chain.now


def restarting_miner(chain: Chain, back_at: int, tick: int = 5):  # type: ignore[no-untyped-def]
    """`fetch_submission` of a miner that serves again from chain time `back_at`; each ask takes `tick` s."""
    async def fetch(ctx, r, miner, commit):  # type: ignore[no-untyped-def]
        chain.now += tick
        await trio.sleep(0)
        return (b"envelope", None) if chain.now >= back_at else (None, NOT_SERVED)
    return fetch


def test_only_unserved_submissions_are_asked_for_again():
    subs = {"0xa": (b"e", None), "0xb": (None, NOT_SERVED), "0xc": (None, "trace does not hash to the committed root")}
    assert unserved(subs) == ["0xb"]


def test_the_wait_is_a_share_of_the_score_phase():
    assert wait_until(100, 400) == 250
    assert wait_until(100, 100) == 100


@pytest.mark.trio
async def test_a_miner_back_within_the_wait_is_scored_on_its_submission(monkeypatch):
    chain = Chain(closed=1000, deadline=1300)  # waits up to 1150
    monkeypatch.setattr(checks, "fetch_submission", restarting_miner(chain, back_at=1030))
    out = await fetch_late(Ctx(chain), 3, {"0xa": COMMIT, "0xb": COMMIT},  # type: ignore[arg-type]
                           {"0xa": (b"a", None), "0xb": (None, NOT_SERVED)})
    assert out == {"0xa": (b"a", None), "0xb": (b"envelope", None)}
    assert chain.now < 1150


@pytest.mark.trio
async def test_a_miner_that_never_returns_is_unavailable_once_the_wait_is_over(monkeypatch):
    chain = Chain(closed=1000, deadline=1300)
    monkeypatch.setattr(checks, "fetch_submission", restarting_miner(chain, back_at=10**9))
    out = await fetch_late(Ctx(chain), 3, {"0xb": COMMIT}, {"0xb": (None, NOT_SERVED)})  # type: ignore[arg-type]
    assert out == {"0xb": (None, NOT_SERVED)}
    assert 1150 <= chain.now < 1150 + 5 + 1


def test_the_wait_stays_within_the_score_phase():
    assert 0 < late_submissions.LATE_SHARE < 1


def _check(miner: str, kind):  # type: ignore[no-untyped-def]
    outcome = checks.CheckOutcome(miner, kind, None, None, "", None, None)
    return checks.MinerCheck(miner, 0, None, outcome, None, 0)  # type: ignore[arg-type]


@pytest.mark.trio
async def test_a_miner_down_mid_check_is_checked_again_once_back_and_a_refusing_one_once_only(monkeypatch):
    """0xdown is down at the first ask and back later; 0xback came back before the first ask
    (restarted while the others were checked: the soak's unpaid honest commit); 0xrefuses is up
    and keeps refusing. The first two are scored on a new check; the third is asked once more."""
    from protocol.core.settlement.fraud import FraudKind

    chain = Chain(closed=1000, deadline=1300)
    up = {"0xdown": False, "0xrefuses": True, "0xback": True}
    rechecked: list[str] = []

    async def miner_up(ctx, miner, commit):  # type: ignore[no-untyped-def]
        chain.now += 5
        if miner == "0xdown" and chain.now >= 1040:
            up["0xdown"] = True  # restarted
        return up[miner]

    async def check_one(ctx, r, miner, commit, seed, state, mode):  # type: ignore[no-untyped-def]
        rechecked.append(miner)
        return _check(miner, FraudKind.UNAVAILABLE if miner == "0xrefuses" else None)

    monkeypatch.setattr(late_submissions, "miner_up", miner_up)
    monkeypatch.setattr(late_submissions, "check_one", check_one)
    monkeypatch.setattr(late_submissions, "RECHECK_EVERY_S", 0)
    found = [_check(m, FraudKind.UNAVAILABLE) for m in ("0xback", "0xdown", "0xrefuses")]
    out = await late_submissions.recheck_unavailable(Ctx(chain), 3, dict.fromkeys(up, COMMIT),  # type: ignore[arg-type]
                                                     b"", (b"", b""), found)
    assert sorted(rechecked) == ["0xback", "0xdown", "0xrefuses"]  # each once
    assert {c.miner: c.outcome.kind for c in out} == {"0xback": None, "0xdown": None,
                                                      "0xrefuses": FraudKind.UNAVAILABLE}
