"""The hardware classes of a round's accounts as the chain holds them, and how this node checks each miner.

`Staking.hardware_classes` never changes once an account has staked, and every account taking
part in a round has, so each account is read once. The decision itself is pure
(`protocol/core/settlement/class_checks.py`); the chain makes the same one when it settles the round.
"""

from __future__ import annotations

from collections.abc import Iterable

from protocol.core.settlement.class_checks import CheckMode, check_mode
from protocol.node.chain_port import ChainPort


class ClassBook:
    def __init__(self, port: ChainPort, me: str) -> None:
        self.port, self.me = port, me
        self._masks: dict[str, int] = {}
        self._min_weight: int | None = None

    async def mask(self, account: str) -> int:
        """The account's on-chain class set (0: never set, which runs class 0)."""
        if account not in self._masks:
            self._masks[account] = await self.port(self.port.read.staking.hardware_classes, account)
        return self._masks[account]

    async def modes(self, r: int, miners: Iterable[str]) -> dict[str, CheckMode]:
        """How this node checks each of round r's `miners`."""
        validators = list(await self.port(self.port.client.validators_of, r))
        weights = await self.port(self.port.read.rounds.weights_of, r, validators)
        masks = [await self.mask(v) for v in validators]
        if self._min_weight is None:
            self._min_weight = await self.port(self.port.read.staking.min_class_stake)
        own = await self.mask(self.me)
        return {m: check_mode(own, await self.mask(m), masks, weights, self._min_weight) for m in miners}

    async def mode(self, r: int, miner: str) -> CheckMode:
        return (await self.modes(r, [miner]))[miner]
