"""The hook through which a validator can be made to skip its checks (devnet, tests).

A production validator runs with none and never imports one; the devnet's
`--lazy-validators` hands the node an object of this shape
(protocol.devnet.lazy_validator.LazyValidator), which pretends every check passed without
replaying, and `--lying-validators` one that checks but reveals wrong scores
(protocol.devnet.lying_validator.LyingValidator).
"""

from __future__ import annotations

from typing import Any, Protocol

from protocol.core.proof.commitment import Commit
from validator.checks import MinerCheck


class ValidatorCheat(Protocol):
    @property
    def name(self) -> str:
        """What the logs and the devnet report call this behaviour."""
        ...

    async def checks(self, node: Any, r: int, commits: dict[str, Commit],
                     seed_block: bytes) -> list[MinerCheck]:
        """What the validator claims it found, in miner order, in place of its checks."""
        ...

    def revealed(self, scores: dict[str, int]) -> dict[str, int]:
        """The scores it reveals in place of the ones it computed (miners it does not check are left out)."""
        ...
