"""The hook through which a miner can be made to cheat (devnet, tests, benchmarks).

A production miner runs with no cheat and never imports one; the CLI's `--cheat` and the
devnet hand the node an object of this shape (protocol.devnet.cheats.MinerCheat). It runs
in the worker process, so it must pickle.
"""

from __future__ import annotations

from typing import Any, Protocol

from protocol.core.model.gpt import Params
from protocol.core.proof.submission import Submission
from protocol.core.train.data import Dataset
from protocol.core.train.training import Carry, RoundTask


class Cheat(Protocol):
    @property
    def name(self) -> str:
        """What the logs call this behaviour."""
        ...

    def checkpoint_source(self, node: Any) -> Any:
        """What the node serves checkpoints from (its data dir, unless the cheat withholds)."""
        ...

    async def foreign_update(self, node: Any, r: int) -> bytes | None:
        """Anything the cheat needs from the network before training (None: nothing)."""
        ...

    def submit(self, task: RoundTask, ds: Dataset, theta: Params, carry: Carry | None,
               foreign_update: bytes | None) -> Submission:
        """The submission to commit in place of the honest one."""
        ...
