"""The stake rule: --stake is a target, and what the operator unbonded stays unbonded."""

from protocol.core.settlement.stake_target import StakeTarget, current_target


def test_same_target_after_an_unbond_stakes_nothing_more() -> None:
    given = current_target(None, 150, unbonded_now=0)
    assert given.to_add(staked=0, unbonded_now=0) == 150
    again = current_target(given, 150, unbonded_now=50)  # `veritrain unbond 50`, then the same command
    assert again == given and again.to_add(staked=100, unbonded_now=50) == 0


def test_a_slash_is_topped_up_and_a_new_target_counts_from_now() -> None:
    given = StakeTarget(150, unbonded_at=0)
    assert given.to_add(staked=120, unbonded_now=0) == 30  # a slash took 30
    raised = current_target(given, 200, unbonded_now=50)
    assert raised == StakeTarget(200, 50) and raised.to_add(staked=100, unbonded_now=50) == 100
