"""Boundary commitments between pipeline stages and the round's pipelines (issue 32, core)."""

from __future__ import annotations

import pytest

from protocol.core.crypto.signing import NodeIdentity
from protocol.core.errors import ConfigError, SignatureError
from protocol.core.pipeline.boundary import (
    Direction,
    NotEquivocation,
    Signed,
    Slot,
    check_equivocation,
    segment_root,
    sign_boundary,
    verify_boundary,
)
from protocol.core.pipeline.formation import StageMiner, form_pipelines

CHAIN, CONTRACT = 31337, bytes(range(20))
SLOT = Slot(round=4, pipeline=1, stage=0, step=7, microbatch=2, direction=Direction.FORWARD)
H1, H2 = b"\x01" * 32, b"\x02" * 32


def test_a_signed_hash_verifies_for_its_slot_only() -> None:
    me = NodeIdentity.generate()
    sig = sign_boundary(me, CHAIN, CONTRACT, SLOT, H1)
    verify_boundary(me.public_key, sig, CHAIN, CONTRACT, SLOT, H1)
    for slot, h in ((SLOT, H2), (Slot(4, 1, 0, 7, 3, Direction.FORWARD), H1),
                    (Slot(4, 1, 0, 7, 2, Direction.BACKWARD), H1)):
        with pytest.raises(SignatureError):
            verify_boundary(me.public_key, sig, CHAIN, CONTRACT, slot, h)


def test_two_signed_hashes_for_one_slot_are_equivocation_and_nothing_else_is() -> None:
    me, other = NodeIdentity.generate(), NodeIdentity.generate()
    a = Signed(H1, sign_boundary(me, CHAIN, CONTRACT, SLOT, H1))
    b = Signed(H2, sign_boundary(me, CHAIN, CONTRACT, SLOT, H2))
    check_equivocation(me.public_key, CHAIN, CONTRACT, SLOT, a, b)
    with pytest.raises(NotEquivocation, match="same tensor"):
        check_equivocation(me.public_key, CHAIN, CONTRACT, SLOT, a, a)
    framed = Signed(H2, sign_boundary(other, CHAIN, CONTRACT, SLOT, H2))  # someone else's signature
    with pytest.raises(NotEquivocation, match="not the accused's"):
        check_equivocation(me.public_key, CHAIN, CONTRACT, SLOT, a, framed)
    elsewhere = Signed(H2, sign_boundary(me, CHAIN, CONTRACT, Slot(4, 1, 0, 8, 2, Direction.FORWARD), H2))
    with pytest.raises(NotEquivocation):  # two steps, two tensors: honest
        check_equivocation(me.public_key, CHAIN, CONTRACT, SLOT, a, elsewhere)


def test_a_segment_root_binds_every_tensor_in_any_order() -> None:
    slots = [(Slot(0, 0, 1, step, mb, d), bytes([step * 8 + mb * 2 + d]) * 32)
             for step in (1, 2) for mb in (0, 1) for d in Direction]
    root = segment_root(slots)
    assert segment_root(list(reversed(slots))) == root
    changed = [*slots[:-1], (slots[-1][0], H1)]
    assert segment_root(changed) != root


def miners(stage: int, steps: list[int]) -> list[StageMiner]:
    return [StageMiner(f"0x{stage:02x}{i:038x}", s) for i, s in enumerate(steps)]


def test_pipelines_pair_stages_by_last_rounds_verified_steps() -> None:
    by_stage = [miners(0, [30, 6, 18]), miners(1, [6, 30, 18]), miners(2, [18, 30, 6])]
    pipelines = form_pipelines(b"s" * 32, by_stage)
    assert len(pipelines) == 3
    steps = {m.address: m.verified_steps for stage in by_stage for m in stage}
    assert [[steps[a] for a in p] for p in pipelines] == [[30, 30, 30], [18, 18, 18], [6, 6, 6]]
    assert form_pipelines(b"s" * 32, by_stage) == pipelines  # a function of chain data


def test_an_oversubscribed_stage_trains_a_seed_drawn_few_and_the_others_sit_out() -> None:
    by_stage = [miners(0, [30] * 6), miners(1, [30, 30])]
    chosen = {seed: {p[0] for p in form_pipelines(seed, by_stage)} for seed in (b"a" * 32, b"b" * 32, b"c" * 32)}
    assert all(len(c) == 2 for c in chosen.values())
    assert len(set(map(frozenset, chosen.values()))) > 1  # the seed, not the miners, picks who trains
    assert form_pipelines(b"a" * 32, [miners(0, [30]), []]) == []


def test_a_miner_listed_twice_or_a_single_stage_is_refused() -> None:
    with pytest.raises(ConfigError, match="twice"):
        form_pipelines(b"s" * 32, [miners(0, [1]) * 2, miners(1, [1])])
    with pytest.raises(ConfigError, match="two stages"):
        form_pipelines(b"s" * 32, [miners(0, [1])])
