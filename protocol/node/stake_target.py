"""Applying the stake rule (protocol/core/settlement/stake_target.py) with the chain and the data dir."""

from __future__ import annotations

from typing import Any

from protocol.core.settlement.stake_target import StakeTarget, current_target
from protocol.node.store import NodeState

STAKE_TARGET_KEY = "stake:target"  # {"target": units, "unbonded_at": units}


def unbonded_total(client: Any) -> int:
    """Everything `client`'s account ever asked to unbond (Staking's UnbondRequested events):
    unlike `unbonding`, it does not drop back once the tokens are withdrawn."""
    from protocol.chain.events import read_events

    me = client.address.lower()
    return sum(int(e["amount"]) for e in read_events(client, "staking", "UnbondRequested")
               if str(e["account"]).lower() == me)


def stake_to_add(client: Any, state: NodeState, target: int) -> tuple[int, int]:
    """(units to stake now, units unbonded since the target was given); records the target."""
    chosen, unbonded = _chosen(client, state.get(STAKE_TARGET_KEY), target)
    state.set(STAKE_TARGET_KEY, {"target": chosen.target, "unbonded_at": chosen.unbonded_at})
    staked = client.read.staking.stake_of(client.address)
    return chosen.to_add(staked, unbonded), unbonded - chosen.unbonded_at


def planned_stake(client: Any, saved: dict[str, Any] | None, target: int) -> int:
    """Units `stake_to_add` would stake now, given the data dir's saved target (None: none yet),
    with nothing recorded: what the start-up checks against the account's tokens."""
    chosen, unbonded = _chosen(client, saved, target)
    return chosen.to_add(client.read.staking.stake_of(client.address), unbonded)


def _chosen(client: Any, saved: dict[str, Any] | None, target: int) -> tuple[StakeTarget, int]:
    unbonded = unbonded_total(client)
    previous = StakeTarget(int(saved["target"]), int(saved["unbonded_at"])) if saved else None
    return current_target(previous, target, unbonded), unbonded
