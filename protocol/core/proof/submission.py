"""What a miner commits and serves for a round, and the honest way to produce it.

The honest miner calls `honest`: train H steps from θ_r with the carried state, then build
the trace and the update derived from its final checkpoint. Cheating miners
(protocol.devnet.cheats, for the devnet, tests and benchmarks) build a `Submission` in
other ways; the honest path never passes through them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from protocol.core.checkpoint.format import (
    Checkpoint,
    Leaves,
    checkpoint_hash,
    checkpoint_leaves,
    encode_checkpoint,
)
from protocol.core.crypto.hashing import Digest
from protocol.core.model.gpt import Params, build_model
from protocol.core.proof.trace import Trace, carry_hash, trace_root
from protocol.core.proof.work import MinerWork, build_work, derive_update
from protocol.core.train.data import Dataset
from protocol.core.train.training import (
    Carry,
    LocalStepper,
    RoundTask,
    StepHook,
    Stepper,
    batch_fn,
    fresh_checkpoint,
    train_round,
)

CheckpointSink = Callable[[int, Checkpoint, Leaves], bytes]  # (leaf, checkpoint, its digests) -> where it was put (a blob hash)


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


@dataclass(frozen=True)
class StreamedWork:
    """An honest round whose checkpoints went to a sink as they were made (none kept)."""

    root: Digest
    trace: Trace
    blob: bytes
    carry: Carry
    stored: list[bytes]  # what the sink returned for each leaf


def honest_streamed(task: RoundTask, ds: Dataset, theta: Params, carry: Carry | None, sink: CheckpointSink,
                    on_step: StepHook | None = None, stepper: Stepper | None = None) -> StreamedWork:
    """`honest`, bit for bit, holding one checkpoint at a time: each leaf is hashed and handed to
    `sink` (the miner writes it to its blob folder) before the next segment is trained, so a
    miner's memory is a training loop's plus one checkpoint in flight, not all H/k + 1 of them.
    `stepper` (the profile's device, or a process group) replaces the CPU one `on_step` hooks."""
    if stepper is None:
        stepper = LocalStepper(build_model(task.model), batch_fn(task, ds), task.cfg, on_step=on_step)
    leaf = replace(fresh_checkpoint(task, theta, carry), params=theta)  # θ_r itself: nothing writes to it
    ef_in = leaf.ef
    assert ef_in is not None
    hashes, stored, losses = [], [], list[float]()

    def keep(index: int, leaf: Checkpoint) -> None:
        leaves = checkpoint_leaves(leaf)  # one pass over its bytes, for its hash and its file
        hashes.append(checkpoint_hash(leaf, task.model, leaves))
        stored.append(sink(index, leaf, leaves))

    keep(0, leaf)
    for segment in range(task.cfg.n_segments):
        # the sink has the leaf: its moments are trained on in place
        run = stepper(leaf, task.cfg.checkpoint_every, consume=True)
        leaf, segment_losses = run.end, run.losses
        keep(segment + 1, leaf)
        losses += segment_losses
    blob, residual = derive_update(theta, leaf.params, ef_in, task.cfg)
    carry_out = Carry(residual, leaf.exp_avg_sq)
    trace = Trace(tuple(hashes), tuple(losses), carry_hash(carry_out))
    return StreamedWork(trace_root(trace), trace, blob, carry_out, stored)
