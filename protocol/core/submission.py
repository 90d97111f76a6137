"""What a miner commits and serves for a round, and the honest way to produce it.

The honest miner calls `honest`: train H steps from θ_r with the carried state, then build
the trace and the update derived from its final checkpoint. Cheating miners
(protocol.devnet.cheats, for the devnet, tests and benchmarks) build a `Submission` in
other ways; the honest path never passes through them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from protocol.core.checkpoint import Checkpoint, encode_checkpoint
from protocol.core.data import Dataset
from protocol.core.hashing import Digest
from protocol.core.model import Params
from protocol.core.proof import MinerWork, Trace, build_work, trace_root
from protocol.core.training import Carry, RoundTask, StepHook, train_round


@dataclass(frozen=True)
class Submission:
    miner: bytes
    root: Digest  # committed trace root
    trace: Trace
    blob: bytes  # committed update blob
    checkpoints: list[Checkpoint] = field(repr=False)
    withheld: frozenset[int] = frozenset()  # leaves the miner refuses to serve
    carry: Carry | None = field(default=None, repr=False)  # into round r+1

    def fetch(self, leaf: int, task: RoundTask) -> bytes | None:
        if leaf in self.withheld or not 0 <= leaf < len(self.checkpoints):
            return None
        return encode_checkpoint(self.checkpoints[leaf], task.model)


def submit(task: RoundTask, work: MinerWork, blob: bytes | None = None,
           withheld: frozenset[int] = frozenset()) -> Submission:
    return Submission(task.miner, trace_root(work.trace), work.trace,
                      work.blob if blob is None else blob, work.checkpoints, withheld, work.carry)


def honest(task: RoundTask, ds: Dataset, theta: Params, carry: Carry | None,
           on_step: StepHook | None = None) -> Submission:
    """`on_step`: `train_round`'s hook (it sees each step's state; the work does not depend on it)."""
    return submit(task, build_work(task, train_round(task, ds, theta, carry, on_step=on_step), theta))
