"""Which updates are aggregated is decided from chain data alone, as `compute_next` does it: the
round's result (`compute_result`) gives each miner's consensus, and the run config's `selection`
rule and `top_g` pick from it."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from protocol.config.run_setup import TrainingSpec
from protocol.core.aggregation.selection import UnknownSelectionRule
from protocol.core.aggregation.selection import select_updates as core_select
from protocol.core.crypto.keccak import checksum_address
from protocol.core.errors import ConfigError
from protocol.core.settlement.result import compute_result
from protocol.core.settlement.result_inputs import Reveal, RoundInputs
from protocol.node.global_model import select_updates

A, B, C, D = (checksum_address("0x" + c * 40) for c in "abcd")
VALIDATORS = tuple(checksum_address("0x" + c * 40) for c in "123")


def consensus(scores: tuple[int, ...], forfeited: frozenset[str] = frozenset()) -> dict[str, int]:
    """Each miner's consensus when every validator revealed `scores` (columns A, B, C, D)."""
    reveals = {v: Reveal(scores, 2_000_000, bytes(32)) for v in VALIDATORS}
    inputs = RoundInputs(1, (A, B, C, D), VALIDATORS, (1, 1, 1), reveals, forfeited, {}, 1000, 7000)
    return dict(zip(inputs.miners, compute_result(inputs).consensus, strict=True))


def test_a_forfeited_miner_and_a_zero_consensus_are_left_out():
    got = consensus((500, 0, 900, 100), forfeited=frozenset({C}))  # C's fraud was confirmed
    assert got[C] == 0 and got[B] == 0
    assert select_updates(TrainingSpec(), got) == [A, D]


def test_top_g_by_consensus_then_address_returned_in_address_order():
    got = consensus((100, 900, 700, 700))
    assert select_updates(TrainingSpec(top_g=2), got) == [B, C]  # B best; C beats D on the address tie-break
    assert select_updates(TrainingSpec(top_g=3), got) == [B, C, D]
    assert select_updates(TrainingSpec(top_g=3), dict(reversed(got.items()))) == [B, C, D]  # order does not matter
    assert select_updates(TrainingSpec(), got) == [A, B, C, D]  # the default top_g takes all four


def test_by_default_every_update_with_positive_consensus_counts_not_only_the_top_16():
    many = {f"0x{i:040x}": (i % 5) * 100 for i in range(1, 41)}  # 40 miners, 8 of them at consensus 0
    chosen = select_updates(TrainingSpec(), many)
    assert chosen == sorted((m for m, c in many.items() if c > 0), key=lambda m: int(m, 16)) and len(chosen) == 32
    assert len(select_updates(TrainingSpec(top_g=16), many)) == 16  # a run may still cap it
    with pytest.raises(ValidationError):
        TrainingSpec(top_g=16_385)  # beyond a round's bound of miners


def test_a_rule_this_build_does_not_know_is_refused():
    with pytest.raises(ConfigError, match="selection"):
        TrainingSpec(selection="top-consensus-v9")
    with pytest.raises(UnknownSelectionRule):
        core_select({A: 1}, "top-consensus-v9", 1)
    with pytest.raises(ConfigError, match="top_g"):
        core_select({A: 1}, "top-consensus-v1", 0)
