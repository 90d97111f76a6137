"""A node says plainly when a round passed it by (issue 17: a round that finalized with 0
reveals while the network was down told the operator nothing)."""

from __future__ import annotations

from protocol.node.passed_rounds import PassedRound, describe


def test_a_missed_commit_is_said_with_the_round_outcome():
    p = PassedRound(7, {"commit": False}, finalized=True, fallback=False, reveals=3)
    assert describe(p) == "round 7 passed while this node was down: missed commit, finalized with 3 reveals"


def test_a_round_with_no_reveals_is_said_even_when_the_node_did_its_part():
    p = PassedRound(4, {"commit": True, "reveal": False}, finalized=True, fallback=False, reveals=0)
    assert describe(p) == "round 4 passed while this node was down: missed reveal, finalized with 0 reveals"


def test_only_the_first_missed_duty_is_named():
    p = PassedRound(2, {"commit": False, "reveal": False}, finalized=False, fallback=False, reveals=0)
    assert describe(p, down=False) == "round 2 passed this node by: missed commit, not finalized yet"


def test_a_fallback_is_said():
    p = PassedRound(5, {"commit": True, "reveal": True}, finalized=True, fallback=True, reveals=2)
    assert describe(p) == ("round 5 passed while this node was down: fell back with 2 reveals "
                           "(nothing minted, model unchanged)")


def test_a_round_the_node_did_its_part_in_and_that_settled_says_nothing():
    assert describe(PassedRound(1, {"commit": True}, finalized=True, fallback=False, reveals=2)) is None
