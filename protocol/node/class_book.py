"""The hardware classes of a round's accounts as the chain holds them, and how this node checks each miner.

`Staking.hardware_classes` never changes once an account has staked, and every account taking
part in a round has, so each account is read once. The decisions themselves are pure
(`protocol/core/settlement/class_checks.py`, `check_assignment.py`); the chain makes the same
ones when it settles the round.
"""

from __future__ import annotations

from collections.abc import Iterable

from protocol.core.settlement.check_assignment import holds_a_seat
from protocol.core.settlement.class_checks import (
    CheckMode,
    check_mode,
    class_checkers,
    column_deciders,
)
from protocol.node.chain_port import ChainPort


class ClassBook:
    def __init__(self, port: ChainPort, me: str, committee_size: int = 0) -> None:
        self.port, self.me, self.committee_size = port, me, committee_size
        self._masks: dict[str, int] = {}
        self._min_weight: int | None = None
        # a round's validators and weights are its snapshot, fixed when it opened: read once
        self._rounds: dict[int, tuple[list[str], list[int]]] = {}

    async def mask(self, account: str) -> int:
        """The account's on-chain class set (0: never set, which runs class 0)."""
        if account not in self._masks:
            self._masks[account] = await self.port(self.port.read.staking.hardware_classes, account)
        return self._masks[account]

    async def modes(self, r: int, miners: Iterable[str], seed: bytes | None = None) -> dict[str, CheckMode]:
        """How this node checks each of round r's `miners`: by hardware class, and, given the
        round's `seed` and a run with committees, only the miners where it holds a drawn seat
        (reports and audits ask without a seed: any holder of the class may check any miner)."""
        validators, weights, masks = await self._round(r)
        own = await self.mask(self.me)
        out = {}
        for m in miners:
            mode = check_mode(own, await self.mask(m), masks, weights, self._min_weight or 0)
            if mode.checks and seed is not None and not await self.counts(r, self.me, m, seed):
                mode = CheckMode.OFF_COMMITTEE
            out[m] = mode
        return out

    async def mode(self, r: int, miner: str) -> CheckMode:
        return (await self.modes(r, [miner]))[miner]

    async def counts(self, r: int, validator: str, miner: str, seed: bytes) -> bool:
        """Whether `validator`'s number for `miner` counts in round r: it decides the miner's
        column (its class's holders, or everyone) and, with committees, holds one of its drawn
        seats (committee or backup)."""
        validators, weights, masks = await self._round(r)
        if validator not in validators:
            return False
        deciders = column_deciders(weights, class_checkers(await self.mask(miner), masks), self._min_weight or 0)
        return holds_a_seat(validators.index(validator), bytes.fromhex(miner[2:]), weights, deciders,
                            self.committee_size, seed)

    async def _round(self, r: int) -> tuple[list[str], list[int], list[int]]:
        if r not in self._rounds:
            validators = list(await self.port(self.port.client.validators_of, r))
            self._rounds[r] = validators, list(await self.port(self.port.read.rounds.weights_of, r, validators))
        validators, weights = self._rounds[r]
        masks = [await self.mask(v) for v in validators]
        if self._min_weight is None:
            self._min_weight = await self.port(self.port.read.staking.min_class_stake)
        return validators, weights, masks
