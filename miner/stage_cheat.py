"""A lazy stage (devnet and tests only; never in a production miner): from a chosen step on it
nudges its parameters after each update instead of training them as committed, and records what
it did as an honest stage would. Its neighbours, fed its tensors, still replay exactly; its own
segments from that step on do not (docs/PROTOCOL.md §16.6)."""

from __future__ import annotations

from dataclasses import dataclass

NAME = "stage-lazy"


@dataclass(frozen=True)
class LazyStage:
    from_step: int = 2  # the first step after whose update it nudges
    scale: float = 1e-3  # added to every parameter

    @property
    def name(self) -> str:
        return NAME

    def nudges_after(self, step: int) -> bool:
        return step >= self.from_step
