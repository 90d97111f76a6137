"""Cheating stages (devnet and tests only; never in a production miner), docs/PROTOCOL.md §16.6.

A lazy stage, from a chosen step on, nudges its parameters after each update instead of training
them as committed, and records what it did as an honest stage would. Its neighbours, fed its
tensors, still replay exactly; its own segments from that step on do not.

A forking stage trains and commits honestly, but from a chosen step on sends its neighbours
tensors (activations forward, input gradients back) other than those it computed and committed as
sent (one bit of each changed): its own replay is exact, and its neighbours, which trained on what they
were signed, replay exactly too. Only the
signatures its neighbour holds show the lie (`received_signatures.contradicted_sends`)."""

from __future__ import annotations

from dataclasses import dataclass

NAME = "stage-lazy"
FORK_NAME = "stage-fork"


@dataclass(frozen=True)
class LazyStage:
    from_step: int = 2  # the first step after whose update it nudges
    scale: float = 1e-3  # added to every parameter

    @property
    def name(self) -> str:
        return NAME

    def nudges_after(self, step: int) -> bool:
        return step >= self.from_step


@dataclass(frozen=True)
class ForkingStage:
    from_step: int = 2  # the first step whose tensors it sends forked

    @property
    def name(self) -> str:
        return FORK_NAME

    def sends(self, step: int, computed: bytes) -> bytes:
        """What it sends for a tensor it computed at `step`."""
        if step < self.from_step:
            return computed
        return bytes([computed[0] ^ 1]) + computed[1:]  # the lowest bit of the first float32


StageCheat = LazyStage | ForkingStage
