"""Who checks a miner: the validators holding its hardware class, or everyone in tolerance mode.

A validator replays a miner bit for bit only when it runs the miner's class (docs/PROTOCOL.md §10.5), so
a miner's column is decided by the round's validators holding that class. A class with less
than the run's minimum of such validator stake (`min_class_stake`), or less than 2/3 of the
round's validator stake, is not covered: every validator then checks its miners in tolerance
mode, and their scores are discounted. The same
rule sits in `contracts/result_math.vy` (`_column_checkers`), `Staking.class_checkers` and
`Disputes._class_voters`: the chain recomputes what this module decides.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence


def effective_classes(mask: int) -> int:
    """An account's on-chain class set; one that never set it runs class 0."""
    return mask or 1


def holds_class(validator_mask: int, miner_mask: int) -> bool:
    """Whether a validator with class set `validator_mask` may check a miner of `miner_mask` exactly."""
    return effective_classes(validator_mask) & effective_classes(miner_mask) != 0


def class_checkers(miner_mask: int, validator_masks: Sequence[int]) -> tuple[bool, ...]:
    """Per validator, whether it holds the miner's class (`Staking.class_checkers`)."""
    return tuple(holds_class(v, miner_mask) for v in validator_masks)


def covered(weights: Sequence[int], checkers: Sequence[bool], min_class_weight: int) -> bool:
    """Whether the holders of a class carry enough weight to check its miners exactly: the class
    minimum and 2/3 of the round's weight. A score needs support from over half of its deciders'
    weight, so deciding a covered class takes over 1/3 of all stake, as deciding one in
    tolerance mode (everyone decides) takes over half: no class is a small coalition's fief."""
    weight = sum(w for w, c in zip(weights, checkers, strict=True) if c)
    return weight > 0 and weight >= min_class_weight and 3 * weight >= 2 * sum(weights)


def column_deciders(weights: Sequence[int], checkers: Sequence[bool], min_class_weight: int) -> tuple[bool, ...]:
    """The validators whose scores decide a column: the class holders if the class is covered,
    else all of them (tolerance mode)."""
    if covered(weights, checkers, min_class_weight):
        return tuple(checkers)
    return tuple(True for _ in weights)


class CheckMode(enum.StrEnum):
    """How one validator checks one miner."""

    EXACT = "exact"  # it holds the miner's class: bit for bit, failures reported
    TOLERANCE = "tolerance"  # nobody holds the class with enough stake: within δ, discounted, flagged
    SKIP = "skip"  # others hold the class and decide the column; this validator scores it 0
    OFF_COMMITTEE = "off-committee"  # it may check the class but holds none of the miner's drawn seats: scores it 0

    @property
    def checks(self) -> bool:
        """Whether this validator replays and scores the miner at all."""
        return self in (CheckMode.EXACT, CheckMode.TOLERANCE)


def check_mode(own_mask: int, miner_mask: int, validator_masks: Sequence[int], weights: Sequence[int],
               min_class_weight: int) -> CheckMode:
    """How a validator with class set `own_mask` checks a miner of `miner_mask`, among the round's
    validators (`validator_masks`, `weights`): the decision `column_deciders` makes on chain."""
    if not covered(weights, class_checkers(miner_mask, validator_masks), min_class_weight):
        return CheckMode.TOLERANCE
    return CheckMode.EXACT if holds_class(own_mask, miner_mask) else CheckMode.SKIP
