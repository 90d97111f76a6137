"""Stage classes: a staged run's on-chain class set names a (hardware class, stage) pair per bit.

A stage is replayed bit for bit only by a machine of its miner's class (docs/PROTOCOL.md §16.5),
so the stage is part of the class. The chain's class list of a staged run is every pair its run
config permits (`[training.stage_classes]`), stage by stage and, within a stage, in the order of
`[training.classes]`: bit k of a class set is pair k. When every stage permits every class, pair
(class i, stage s) is bit s·C + i; a stage that narrows its classes frees the bits it does not
permit, so a run fits up to `MAX_CLASSES` permitted pairs, not S·C. A stage miner registers one bit;
a validator, for its class, the bit of every stage that permits it (it replays one stage at a
time, any of them). `class_checks`' rule, a column decided by the holders of its miner's class,
then makes a stage miner's deciders the validators of its class for its stage, with no change on
chain. A run without stages keeps bit i = class i (`hardware_class.class_mask`).

Pure and torch-free: the run's class list and per-stage lists come in as plain sequences.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from protocol.core.errors import ConfigError
from protocol.core.hardware.hardware_class import MAX_CLASSES, ClassNotPermitted, label
from protocol.core.hardware.replay_profile import ReplayProfile

__all__ = ["NotOneStage", "StageClass", "StageClassesOverflow", "check_chain_width", "miner_mask", "miner_stage",
           "stage_bit", "stage_class_list", "stage_classes_in", "validator_mask"]

Permitted = Sequence[Sequence[ReplayProfile]]  # per stage, the classes it permits (each a subset of the run's)


class StageClassesOverflow(ConfigError):
    """Raised when a staged run permits more (class, stage) pairs than an on-chain class set holds."""


class NotOneStage(ConfigError):
    """Raised when a stage miner's class set names no permitted (class, stage) pair or more than one."""


class StageClass(NamedTuple):
    """One bit of a staged run's class set: a hardware class on one stage."""

    profile: ReplayProfile
    stage: int


def stage_class_list(classes: Sequence[ReplayProfile], permitted: Permitted) -> list[StageClass]:
    """The chain's class list of a staged run: bit k of a class set is entry k."""
    # the run's order within a stage, not the stage list's: reordering a stage list moves no bit
    return [StageClass(c, s) for s, allowed in enumerate(permitted) for c in classes if c in allowed]


def check_chain_width(classes: Sequence[ReplayProfile], permitted: Permitted) -> None:
    """Refuse a staged run whose permitted pairs do not fit a class set (`Staking.set_hardware_classes`
    reverts at `MAX_CLASSES` bits): better at resolve than at every node's first transaction."""
    pairs = len(stage_class_list(classes, permitted))
    if pairs > MAX_CLASSES:
        raise StageClassesOverflow(
            f"[training.stage_classes] permits {pairs} (class, stage) pairs over {len(permitted)} stages; an "
            f"on-chain class set holds at most {MAX_CLASSES}: permit fewer classes per stage, or fewer stages")


def stage_bit(classes: Sequence[ReplayProfile], permitted: Permitted, profile: ReplayProfile, stage: int) -> int:
    """The bit of `profile` on `stage`; `ClassNotPermitted` when that stage does not permit it."""
    try:
        return stage_class_list(classes, permitted).index(StageClass(profile, stage))
    except ValueError:
        raise ClassNotPermitted(f"hardware class {label(profile)} is not permitted for stage {stage} "
                                f"(permitted: {_labels(permitted, stage)})") from None


def miner_mask(classes: Sequence[ReplayProfile], permitted: Permitted, profile: ReplayProfile, stage: int) -> int:
    """A stage miner's class set: its one (class, stage) bit (the chain takes one bit from a miner)."""
    return 1 << stage_bit(classes, permitted, profile, stage)


def validator_mask(classes: Sequence[ReplayProfile], permitted: Permitted, profile: ReplayProfile) -> int:
    """A validator's class set: `profile` on every stage that permits it."""
    mask = sum(1 << k for k, pair in enumerate(stage_class_list(classes, permitted)) if pair.profile == profile)
    if not mask:  # an empty set would read as bit 0 on chain: some other class's stage 0
        raise ClassNotPermitted(f"hardware class {label(profile)} is permitted for no stage of this run")
    return mask


def stage_classes_in(classes: Sequence[ReplayProfile], permitted: Permitted, mask: int) -> list[StageClass]:
    """The (class, stage) pairs a class set names (bits past the list name nothing, as in `classes_in`)."""
    return [pair for k, pair in enumerate(stage_class_list(classes, permitted)) if mask >> k & 1]


def miner_stage(classes: Sequence[ReplayProfile], permitted: Permitted, mask: int) -> int:
    """The stage a miner's class set registers; `NotOneStage` unless it names exactly one pair.
    An on-chain set of 0 means bit 0: pass it through `class_checks.effective_classes` first."""
    named = stage_classes_in(classes, permitted, mask)
    if len(named) != 1 or mask & (mask - 1):
        raise NotOneStage(f"class set {mask:#x} names {len(named)} permitted (class, stage) pairs; a stage miner "
                          f"registers exactly one")
    return named[0].stage


def _labels(permitted: Permitted, stage: int) -> str:
    if not 0 <= stage < len(permitted):
        return f"none: the run has stages 0 to {len(permitted) - 1}"
    return ", ".join(label(c) for c in permitted[stage])
