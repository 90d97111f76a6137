"""The stake rule of a node: `--stake` is a target, and what the operator unbonds stays unbonded.

A node tops its stake up to the target minus everything its account unbonded since that
target was first given (recorded in the data dir). Restarting with the same target therefore
stakes back only what a slash took, never what `veritrain unbond` queued; giving another
target starts the count again from there.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class StakeTarget:
    target: int  # token units the operator asked for
    unbonded_at: int  # the account's unbonded total (all requests ever) when the target was given

    def to_add(self, staked: int, unbonded_now: int) -> int:
        """Units to stake now: up to the target less what was unbonded since it was given."""
        wanted = self.target - max(0, unbonded_now - self.unbonded_at)
        return max(0, wanted - staked)


def current_target(recorded: StakeTarget | None, target: int, unbonded_now: int) -> StakeTarget:
    """The recorded target if the operator gave the same one again, else a new one from now."""
    if recorded is not None and recorded.target == target:
        return recorded
    return StakeTarget(target, unbonded_now)
