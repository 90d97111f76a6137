"""Stage classes (protocol/core/hardware/stage_classes.py): a staged run's class set names (class, stage)
pairs, a stage miner holds one and a validator every stage of its class, so `class_checks`' rule (a
column is decided by the holders of its miner's class) puts a stage miner before the validators of
its class and nobody else, and the chain's 16-bit class set is never overflowed."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocol.core.hardware.hardware_class import MAX_CLASSES, ClassNotPermitted, class_mask
from protocol.core.hardware.replay_profile import ReplayProfile
from protocol.core.hardware.stage_classes import (
    NotOneStage,
    StageClass,
    StageClassesOverflow,
    check_chain_width,
    miner_mask,
    miner_stage,
    stage_bit,
    stage_class_list,
    stage_classes_in,
    validator_mask,
)
from protocol.core.settlement.class_checks import (
    CheckMode,
    check_mode,
    class_checkers,
    column_deciders,
)

A, B, C = (ReplayProfile(threads=t) for t in (1, 2, 3))
RUN = [A, B, C]
# stage 0 permits A and B, stage 1 A alone, stage 2 B alone
STAGES = [[B, A], [A], [B]]
T = 10**18


def test_every_class_on_every_stage_is_bit_s_times_c_plus_i_and_one_stage_is_the_unstaged_mask():
    everywhere = [RUN] * 4
    for s in range(4):
        for i, c in enumerate(RUN):
            assert stage_bit(RUN, everywhere, c, s) == s * len(RUN) + i
    for c in RUN:
        assert miner_mask(RUN, [RUN], c, 0) == class_mask(RUN, [c])


def test_a_stage_that_narrows_its_classes_frees_their_bits_in_the_runs_order():
    # stage 0 lists B before A: bits follow [training.classes], so reordering a stage list moves none
    assert stage_class_list(RUN, STAGES) == [StageClass(A, 0), StageClass(B, 0), StageClass(A, 1), StageClass(B, 2)]
    assert [stage_bit(RUN, STAGES, c, s) for c, s in ((A, 0), (B, 0), (A, 1), (B, 2))] == [0, 1, 2, 3]


@pytest.mark.parametrize(("profile", "stage"), [(B, 1), (A, 2), (C, 0), (A, 3)])
def test_a_miner_cannot_register_a_class_its_stage_does_not_permit(profile, stage):
    with pytest.raises(ClassNotPermitted, match=f"not permitted for stage {stage}"):
        miner_mask(RUN, STAGES, profile, stage)


def test_a_validator_holds_its_class_on_every_stage_that_permits_it():
    assert stage_classes_in(RUN, STAGES, validator_mask(RUN, STAGES, A)) == [StageClass(A, 0), StageClass(A, 1)]
    assert stage_classes_in(RUN, STAGES, validator_mask(RUN, STAGES, B)) == [StageClass(B, 0), StageClass(B, 2)]
    with pytest.raises(ClassNotPermitted, match="no stage"):  # an empty set would read as bit 0 on chain
        validator_mask(RUN, STAGES, C)


def test_a_miners_set_names_its_stage_and_nothing_else_does():
    for pair in stage_class_list(RUN, STAGES):
        mask = miner_mask(RUN, STAGES, *pair)
        assert stage_classes_in(RUN, STAGES, mask) == [pair] and miner_stage(RUN, STAGES, mask) == pair.stage
    for mask in (0, 0b11, 1 << 4, 1 | 1 << 4):  # none, two pairs, a bit past the list, one pair and such a bit
        with pytest.raises(NotOneStage):
            miner_stage(RUN, STAGES, mask)


def test_the_permitted_pairs_must_fit_the_chains_class_set():
    classes = [ReplayProfile(threads=t) for t in range(1, 9)]
    check_chain_width(classes, [classes] * 2)  # 16 pairs: the contract's limit exactly
    with pytest.raises(StageClassesOverflow, match=f"17 .* at most {MAX_CLASSES}"):
        check_chain_width(classes, [classes, classes, classes[:1]])
    check_chain_width(classes, [classes[:5]] * 3)  # 3 x 8 classes, narrowed to 15 pairs: fits


def test_a_stage_miner_is_decided_by_its_classs_validators_only():
    va, vb = validator_mask(RUN, STAGES, A), validator_mask(RUN, STAGES, B)
    validators = [va, va, vb]
    a_on_1 = miner_mask(RUN, STAGES, A, 1)
    assert class_checkers(a_on_1, validators) == (True, True, False)
    assert column_deciders([2 * T, T, T], class_checkers(a_on_1, validators), T) == (True, True, False)
    assert check_mode(va, a_on_1, validators, [2 * T, T, T], T) is CheckMode.EXACT
    assert check_mode(vb, a_on_1, validators, [2 * T, T, T], T) is CheckMode.SKIP
    b_on_2 = miner_mask(RUN, STAGES, B, 2)  # stage 2 permits B alone
    assert class_checkers(b_on_2, validators) == (False, False, True)
    assert column_deciders([T, T, 4 * T], class_checkers(b_on_2, validators), T) == (False, False, True)
    # B's validators hold stage 0 too, but not A's bit there: a stage-0 miner of A is A's
    assert class_checkers(miner_mask(RUN, STAGES, A, 0), validators) == (True, True, False)


@st.composite
def staged_runs(draw):
    """Two to four stages over four classes, each stage permitting a non-empty subset."""
    classes = [ReplayProfile(threads=t) for t in range(1, 5)]
    subsets = st.lists(st.sampled_from(classes), min_size=1, max_size=4, unique=True)
    return classes, draw(st.lists(subsets, min_size=2, max_size=4))


@given(staged_runs())
def test_a_validator_holds_a_stage_miner_exactly_when_they_share_a_class(run):
    classes, permitted = run
    for miner in stage_class_list(classes, permitted):
        wanted = miner_mask(classes, permitted, *miner)
        for v in {p for p, _ in stage_class_list(classes, permitted)}:
            held = class_checkers(wanted, [validator_mask(classes, permitted, v)])
            assert held == (v == miner.profile,)
