"""Which updates are aggregated is decided from chain data alone, the same on every node."""

from __future__ import annotations

from protocol.node.global_model import select_updates

A, B, C, D = ("0x" + c * 40 for c in "abcd")


def test_held_and_zero_scores_are_left_out():
    rows = [(A, 500, False), (B, 0, False), (C, 900, True), (D, 100, False)]
    assert select_updates(rows, top_g=16) == [A, D]


def test_top_g_by_consensus_then_address_returned_in_address_order():
    rows = [(D, 700, False), (C, 700, False), (B, 900, False), (A, 100, False)]
    assert select_updates(rows, top_g=2) == [B, C]  # B best; C beats D on the address tie-break
    assert select_updates(rows, top_g=3) == [B, C, D]
    assert select_updates(list(reversed(rows)), top_g=3) == [B, C, D]  # order of rows does not matter
