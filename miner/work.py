"""What a miner's worker process computes (module-level functions: they run under the
replay profile in a spawned process, never on the trio thread). An honest miner trains on its
profile's device, and with a world size above 1 through a process group of that many ranks
(protocol/node/ddp_worker.py)."""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass
from pathlib import Path

from miner.cheat import Cheat
from miner.checkpoint_files import CheckpointWriter
from protocol.config.run_setup import Setup, TrainingSpec
from protocol.config.run_state import load_dataset
from protocol.core.aggregation.state import decode_state
from protocol.core.checkpoint.format import encode_checkpoint
from protocol.core.proof.envelope import encode_envelope, encode_proof
from protocol.core.proof.submission import honest_streamed
from protocol.core.proof.trace import carry_hash, decode_carry, encode_carry, leaf_proof, trace_root
from protocol.core.train.training import RoundTask, StepHook, zero_carry
from protocol.node.ddp_worker import stepper_for
from protocol.node.store import write_blob
from protocol.node.throughput import throttle_pause


@dataclass(frozen=True)
class MinerJob:
    spec: TrainingSpec
    run_seed: bytes
    round: int
    miner: str  # 0x address
    state_blob: bytes  # encoded global state θ_r
    state_hash: bytes  # its attested hash
    carry_in: bytes | None  # proof.encode_carry of what the last round carried out, None = zeros
    chain_id: int
    contract: str  # rounds contract address (where commit_update goes; bound into the envelope)
    cheat: Cheat | None = None  # devnet and tests only: computes the submission instead
    foreign_update: bytes | None = None  # what the cheat fetched before training (copy/stale)
    blob_dir: str | None = None  # the node's blob folder: checkpoints are stored there, not returned
    steps: int = 0  # inner steps to train (capacity-scaled work; 0: the run's H)
    slowdown: float = 1.0  # tests and devnet only: play a machine this many times slower


@dataclass(frozen=True)
class MinerOutput:
    envelope: bytes  # the committed blob; its content hash is the update hash
    trace_root: bytes
    checkpoints: list[bytes | None]  # content hash of each encoded checkpoint, stored in blob_dir (None: withheld)
    proofs: list[bytes]  # Merkle proof of each checkpoint leaf
    withheld: list[int]  # leaves a withholding cheater refuses to serve
    carry: bytes  # proof.encode_carry of what this round carries into the next
    steps: int  # inner steps trained
    train_s: float  # wall time of the training itself (the next round's step count follows it)


def produce(job: MinerJob) -> MinerOutput:
    setup = Setup(job.spec, job.run_seed)
    model, cfg = setup.model, setup.compute.with_steps(job.steps)
    ds = load_dataset(job.spec.dataset)
    theta = decode_state(job.state_blob, model, job.state_hash).params
    carry = decode_carry(job.carry_in, model) if job.carry_in else None
    task = RoundTask(job.run_seed, job.round, bytes.fromhex(job.miner[2:]), model, cfg)
    if job.blob_dir is None:
        raise ValueError("MinerJob.blob_dir is required: checkpoints are stored by the worker")
    blob_dir = Path(job.blob_dir)
    started = time.perf_counter()
    if job.cheat is None:  # each checkpoint goes to disk as it is made: one in memory at a time
        reload = functools.partial(load_dataset, job.spec.dataset)  # a process group's ranks load their own
        writer = CheckpointWriter(blob_dir, model)
        try:
            with stepper_for(setup.profile, task, ds, reload, throttle(job.slowdown)) as stepper:
                work = honest_streamed(task, ds, theta, carry, writer, stepper=stepper)
            writer.commit()  # durable before the node commits to them on chain
        except BaseException:
            writer.abort()
            raise
        trace, update, carry_out, withheld = work.trace, work.blob, work.carry, frozenset[int]()
        stored: list[bytes | None] = list(work.stored)
    else:
        sub = job.cheat.submit(task, ds, theta, carry, job.foreign_update)
        trace, update, withheld = sub.trace, sub.blob, sub.withheld
        carry_out = sub.carry if sub.carry is not None else zero_carry(model)
        stored = [None if leaf in sub.withheld else write_blob(blob_dir, encode_checkpoint(c, model))
                  for leaf, c in enumerate(sub.checkpoints)]
    train_s = time.perf_counter() - started
    envelope = encode_envelope(job.chain_id, job.contract, job.round, job.miner, trace, update)
    assert carry_hash(carry_out) == trace.carry_hash or job.cheat is not None
    proofs = []
    for i in range(len(stored)):
        p = leaf_proof(trace, i)
        proofs.append(encode_proof(p.index, p.size, list(p.siblings)))
    return MinerOutput(envelope, bytes(trace_root(trace)), stored, proofs, sorted(withheld),
                       encode_carry(carry_out), cfg.inner_steps, train_s)


def throttle(slowdown: float) -> StepHook | None:
    """A step hook that makes training `slowdown` times slower: after each step it sleeps
    `throttle_pause` (tests and devnet: a slower machine)."""
    if slowdown <= 1:
        return None
    last = [time.perf_counter()]

    def hook(_state: object) -> None:
        time.sleep(throttle_pause(slowdown, time.perf_counter() - last[0]))
        last[0] = time.perf_counter()

    return hook
