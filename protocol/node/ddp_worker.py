"""The launcher of a multi-process miner: `world_size` spawned ranks running one task's steps.

`DdpGroup(profile, task, ds)` starts `profile.world_size` 'spawn' processes with the profile's
environment (`worker_pool.profile_environment`: ISA, threads, cuBLAS workspace before torch is
imported). Each joins a torch.distributed group, gloo on CPU and nccl on CUDA (rank r on
cuda:r), through a FileStore in a fresh temporary folder (no port to pick or race for), and
checks the profile (world size included) before it reports ready. Calling the group runs
steps: the start checkpoint goes to every rank as its canonical encoding, each rank runs
`ddp_sync.rank_stepper` on its shard, and rank 0 sends back the end checkpoint (encoded),
the losses and, with `hash_steps`, each step's checkpoint hash. The group is a
`training.Stepper`, so the miner trains (`submission.honest_streamed`) and the validator replays
(`proof.replay_segment`) through it exactly as through the one-process stepper.

A rank that raises or dies fails the call with `DdpError` (a `ProfileMismatch` stays itself: a
profile problem, never fraud) and takes the group down. Closing stops every rank and reaps it;
a rank whose launcher vanishes sees its pipe close, or its parent change, and exits. Messages are pickled, but only
between this process and the ranks it started; checkpoints travel as safetensors bytes.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import shutil
import tempfile
from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import timedelta
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

from protocol.core.checkpoint.format import Checkpoint, decode_checkpoint, encode_checkpoint
from protocol.core.errors import VeritrainError
from protocol.core.hardware.observe import check_profile
from protocol.core.hardware.replay_profile import ProfileMismatch, ReplayProfile, is_cuda
from protocol.core.model.gpt import build_model
from protocol.core.train.data import Dataset
from protocol.core.train.ddp import check_world_size
from protocol.core.train.training import (
    RoundTask,
    StepHook,
    Stepped,
    Stepper,
    batch_fn,
    local_stepper,
)
from protocol.node.ddp_sync import rank_stepper
from protocol.node.profile_setup import set_in_process
from protocol.node.worker_pool import profile_environment, watch_parent

COLLECTIVE_TIMEOUT = timedelta(minutes=10)  # a rank waits this long for its peers in one collective
STOP_GRACE_S = 30.0  # seconds a stopped rank gets to leave its group before it is terminated
DatasetSource = Dataset | Callable[[], Dataset]  # the corpus, or a picklable loader the ranks call


class DdpError(VeritrainError):
    """Raised when a rank of a multi-process miner fails, dies, or the group is used closed."""


class DdpGroup:
    """`profile.world_size` ranks training `task` together; a `training.Stepper` (context manager)."""

    def __init__(self, profile: ReplayProfile, task: RoundTask, ds: DatasetSource, hash_steps: bool = False) -> None:
        check_world_size(task.cfg.batch_size, profile.world_size)  # WorldSizeError before any process starts
        self.profile, self.task, self.hash_steps = profile, task, hash_steps
        self._ds = ds
        self._procs: list[multiprocessing.process.BaseProcess] = []
        self._conns: list[Connection] = []
        self._store_dir: Path | None = None
        self.pids: list[int] = []  # every rank process this group started (kept after close: tests check them)

    def start(self) -> DdpGroup:
        """Start the ranks and wait until each has joined the group and checked the profile."""
        if self._procs:
            return self
        ctx = multiprocessing.get_context("spawn")
        self._store_dir = Path(tempfile.mkdtemp(prefix="veritrain-ddp-"))
        store = self._store_dir / "store"
        daemon = not multiprocessing.current_process().daemon  # a daemon cannot have children
        with profile_environment(self.profile):
            for rank in range(self.profile.world_size):
                ours, theirs = ctx.Pipe()
                args = (rank, str(store), self.profile, self.task, self._ds, self.hash_steps, theirs)
                proc = ctx.Process(target=_rank_main, args=args, name=f"veritrain-rank-{rank}", daemon=daemon)
                proc.start()
                self.pids.append(proc.pid or 0)
                theirs.close()  # the rank holds the only other end: its death closes our pipe
                self._procs.append(proc)
                self._conns.append(ours)
        self._gather()  # every rank's "ready"
        return self

    def __enter__(self) -> DdpGroup:
        try:
            return self.start()
        except BaseException:
            self.close()
            raise

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __call__(self, start: Checkpoint, n_steps: int, consume: bool = False) -> Stepped:
        """Run `n_steps` from `start` on every rank; rank 0's result. `consume` changes nothing
        here: the ranks train on their own decoded copies."""
        if not self._procs:
            raise DdpError("DdpGroup used before start() or after close()")
        blob = encode_checkpoint(start, self.task.model)
        for conn in self._conns:
            self._send(conn, ("run", blob, n_steps))
        end_blob, losses, hashes = self._gather()[0]
        return Stepped(decode_checkpoint(end_blob, self.task.model), losses, hashes)

    def close(self, grace_s: float = STOP_GRACE_S) -> None:
        """Stop every rank, wait for it (terminate it after `grace_s`), reap it, clean up."""
        for conn in self._conns:
            with contextlib.suppress(OSError):
                conn.send(("stop",))
        for proc in self._procs:
            proc.join(grace_s)
            if proc.is_alive():
                proc.terminate()
                proc.join(5.0)
            if proc.is_alive():
                proc.kill()
                proc.join()
            proc.close()
        for conn in self._conns:
            conn.close()
        self._procs, self._conns = [], []
        if self._store_dir is not None:
            shutil.rmtree(self._store_dir, ignore_errors=True)
            self._store_dir = None

    def _send(self, conn: Connection, message: tuple[Any, ...]) -> None:
        try:
            conn.send(message)
        except OSError as exc:
            self._fail(DdpError(f"a rank of the group is gone: {exc}"))

    def _gather(self) -> list[Any]:
        """One answer from every rank, in rank order; the first failure (an error message, or a
        rank exiting without answering) takes the group down and is raised."""
        answers: dict[int, Any] = {}
        while len(answers) < len(self._conns):
            waiting = {r: (c, self._procs[r].sentinel) for r, c in enumerate(self._conns) if r not in answers}
            ready = wait([w for pair in waiting.values() for w in pair])
            for rank, (conn, sentinel) in waiting.items():
                if conn in ready:
                    answers[rank] = self._answer(rank, conn)
                elif sentinel in ready:
                    self._fail(DdpError(f"rank {rank} exited (code {self._procs[rank].exitcode}) without answering"))
        return [answers[r] for r in range(len(self._conns))]

    def _answer(self, rank: int, conn: Connection) -> Any:
        try:
            kind, payload = conn.recv()
        except (EOFError, OSError):
            self._fail(DdpError(f"rank {rank} closed its pipe without answering"))
        if kind == "mismatch":
            self._fail(ProfileMismatch(payload))
        if kind == "error":
            self._fail(DdpError(f"rank {rank}: {payload}"))
        return payload

    def _fail(self, exc: VeritrainError) -> Any:
        self.close(grace_s=1.0)  # the others may be stuck in a collective with the failed rank
        raise exc


def _rank_main(rank: int, store: str, profile: ReplayProfile, task: RoundTask, ds: DatasetSource,
               hash_steps: bool, conn: Connection) -> None:
    """One rank: join the group, check the profile, then run steps until told to stop."""
    import torch
    import torch.distributed as dist

    from protocol.core.model.placement import placement_of

    watch_parent()  # a rank busy in a step outlives no killed worker, nor takes Ctrl-C itself
    try:
        set_in_process(profile)
        if is_cuda(profile):
            torch.cuda.set_device(rank)
        dist.init_process_group("nccl" if is_cuda(profile) else "gloo", init_method=f"file://{store}",
                                rank=rank, world_size=profile.world_size, timeout=COLLECTIVE_TIMEOUT)
        check_profile(profile)  # inside the group: its world size is observed
        corpus = ds() if callable(ds) else ds
        stepper = rank_stepper(build_model(task.model), batch_fn(task, corpus), task.cfg, placement_of(profile, rank),
                               rank, profile.world_size, task.model if hash_steps else None)
        conn.send(("ready", None))
        _serve(rank, stepper, task, conn)
    except ProfileMismatch as exc:
        conn.send(("mismatch", exc.differences))
    except Exception as exc:  # a rank's top level: every failure goes to the launcher, typed or not
        with contextlib.suppress(OSError):
            conn.send(("error", f"{type(exc).__name__}: {exc}"))
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
        conn.close()


def _serve(rank: int, stepper: Stepper, task: RoundTask, conn: Connection) -> None:
    while True:
        try:
            message = conn.recv()
        except EOFError:  # the launcher is gone
            return
        if message[0] == "stop":
            return
        _, blob, n_steps = message
        run = stepper(decode_checkpoint(blob, task.model), n_steps, consume=True)
        conn.send(("done", (encode_checkpoint(run.end, task.model), run.losses, run.step_hashes) if rank == 0 else None))


def stepper_for(profile: ReplayProfile, task: RoundTask, ds: Dataset, reload: Callable[[], Dataset] | None = None,
                on_step: StepHook | None = None, hash_steps: bool = False) -> AbstractContextManager[Stepper]:
    """The stepper a node trains or replays `task` with under `profile`: one process on its
    device, or a `DdpGroup` for a world size above 1 (whose ranks load the corpus with `reload`
    if given, rather than receive a copy of `ds`). `on_step` runs in one process only."""
    if profile.world_size == 1:
        return contextlib.nullcontext(local_stepper(profile, build_model(task.model), batch_fn(task, ds), task.cfg,
                                                    on_step, task.model if hash_steps else None))
    if on_step is not None:
        raise DdpError("a step hook runs in one process; a process group takes none")
    return DdpGroup(profile, task, reload if reload is not None else ds, hash_steps)
