"""The devnet runs past its rounds until every lazy aggregator has been drawn for a tree node
(`protocol/devnet/until_drawn.py`), and not a round longer."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import trio

from protocol.devnet.until_drawn import EXTRA_ROUNDS, RoundPlan
from protocol.node.node_config import NodeConfig
from validator.tree_round import RoundTree

LAZY, HONEST = "0x" + "aa" * 20, "0x" + "bb" * 20
OTHERS = ["0x" + "cc" * 20, "0x" + "dd" * 20]


def tree(r: int, *servers: tuple[str, str]) -> RoundTree:
    return RoundTree(r, 4, ["0x" + "01" * 20], {(1, i): pair for i, pair in enumerate(servers)}, 1, b"", b"")


async def no_tree(r: int) -> None:
    return None


def network(rounds: int, tree_for=no_tree):
    def member(address: str, name: str) -> SimpleNamespace:
        node = SimpleNamespace(config=NodeConfig(data_dir=Path("unused"), max_rounds=rounds),
                               tree=SimpleNamespace(tree_for=tree_for))
        return SimpleNamespace(address=address.upper().replace("0X", "0x"), name=name, node=node)

    lazy, honest = member(LAZY, "validator3"), member(HONEST, "validator1")
    miner = SimpleNamespace(address=OTHERS[0], name="miner0", node=SimpleNamespace(
        config=NodeConfig(data_dir=Path("unused"), max_rounds=rounds)))
    lines: list[str] = []
    plan = RoundPlan(rounds, [lazy, honest, miner], [lazy], lines.append)
    return plan, [lazy, honest, miner], lines


def test_a_lazy_aggregator_undrawn_in_the_last_round_gives_every_node_one_more() -> None:
    plan, members, lines = network(2)
    plan.seen(0, tree(0, tuple(OTHERS)))  # not the last round: nothing yet
    assert plan.rounds == 2
    plan.seen(1, tree(1, tuple(OTHERS)))
    assert plan.rounds == 3 and [m.node.config.max_rounds for m in members] == [3, 3, 3]
    plan.seen(1, tree(1, tuple(OTHERS)))  # the same round seen again: still one more, not two
    assert plan.rounds == 3 and "validator3" in lines[-1]
    plan.seen(2, tree(2, (OTHERS[0], LAZY)))  # drawn at last: the run ends as planned now
    assert plan.rounds == 3 and [m.node.config.max_rounds for m in members] == [3, 3, 3]


def test_a_lazy_aggregator_drawn_in_time_adds_no_round() -> None:
    plan, members, _ = network(2)
    plan.seen(0, tree(0, (LAZY, HONEST)))
    plan.seen(1, None)  # a flat round
    assert plan.rounds == 2 and [m.node.config.max_rounds for m in members] == [2, 2, 2]


def test_the_run_ends_after_its_extra_rounds_and_says_so() -> None:
    plan, _, lines = network(1)
    for r in range(1 + EXTRA_ROUNDS + 3):
        plan.seen(r, None)
    assert plan.rounds == 1 + EXTRA_ROUNDS
    assert "not drawn in 9 rounds" in lines[-1]


def test_the_plan_sees_each_tree_the_lazy_aggregator_draws() -> None:
    for servers, rounds in (((HONEST, LAZY), 1), (tuple(OTHERS), 2)):
        drawn = tree(0, servers)

        async def tree_for(r: int, drawn: RoundTree = drawn) -> RoundTree:
            return drawn

        plan, members, _ = network(1, tree_for)
        assert trio.run(members[0].node.tree.tree_for, 0) is drawn
        assert plan.rounds == rounds
