"""The devnet keeps going when one node crashes, and fails fast when a whole role is gone."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import pytest
import trio

from protocol.chain.client import Role
from protocol.devnet.network import DevnetIncomplete, _check_quorum, _guarded


@dataclass
class _Node:
    log: logging.Logger
    fail: bool

    async def run(self) -> None:
        await trio.sleep(0.01)
        if self.fail:
            raise RuntimeError("boom")


@dataclass
class _Member:
    role: Role
    node: _Node

    @property
    def name(self) -> str:
        return self.node.log.name.removeprefix("veritrain.")


def _member(role: Role, i: int, fail: bool) -> _Member:
    return _Member(role, _Node(logging.getLogger(f"veritrain.{role.name.lower()}{i}"), fail))


def test_a_crashed_node_is_reported_and_the_others_finish(caplog) -> None:
    members = [_member(Role.MINER, 0, True), _member(Role.MINER, 1, False), _member(Role.VALIDATOR, 2, False)]
    crashed: dict[str, str] = {}
    lines: list[str] = []

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            for m in members:
                nursery.start_soon(_guarded, m, crashed, lines.append)

    with caplog.at_level(logging.ERROR):
        trio.run(main)
    assert crashed == {"miner0": "RuntimeError: boom"}
    assert lines == ["miner0 crashed: RuntimeError: boom"]
    assert "node crashed" in caplog.text and "Traceback" in caplog.text
    _check_quorum(members, crashed)  # one miner is still up: no error


def test_no_validator_left_fails_fast() -> None:
    members = [_member(Role.MINER, 0, False), _member(Role.VALIDATOR, 1, True)]
    with pytest.raises(DevnetIncomplete, match="every validator crashed"):
        _check_quorum(members, {"validator1": "RuntimeError: boom"})
