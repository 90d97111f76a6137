"""What a validator reveals per miner under hardware classes (`validator.scoring.class_adjusted`)."""

from __future__ import annotations

from protocol.core.settlement.class_checks import CheckMode
from validator.scoring import class_adjusted

SCORES = {"0xa": 60000, "0xb": 40000, "0xc": 20001, "0xd": 10}


def test_exact_scores_stand_skipped_miners_reveal_zero_and_tolerance_is_discounted():
    modes = {"0xa": CheckMode.EXACT, "0xb": CheckMode.SKIP, "0xc": CheckMode.TOLERANCE}
    assert class_adjusted(SCORES, modes, 0.5) == {"0xa": 60000, "0xb": 0, "0xc": 10000, "0xd": 10}


def test_the_scale_is_kept_so_validators_of_other_classes_agree_on_the_miners_they_share():
    # a validator that skips the top miner still scales against it: its score of the others is
    # what a validator checking everyone gives them
    everyone = class_adjusted(SCORES, {}, 0.5)
    partial = class_adjusted(SCORES, {"0xa": CheckMode.SKIP}, 0.5)
    assert {m: s for m, s in partial.items() if m != "0xa"} == {m: s for m, s in everyone.items() if m != "0xa"}


def test_no_discount_and_full_discount():
    tol = {m: CheckMode.TOLERANCE for m in SCORES}
    assert class_adjusted(SCORES, tol, 1.0) == SCORES
    assert set(class_adjusted(SCORES, tol, 0.0).values()) == {0}
