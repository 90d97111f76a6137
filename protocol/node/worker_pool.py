"""The worker process that runs training, replay and aggregation under the replay profile.

Training holds the GIL for seconds; run on the trio thread it would stall every transfer,
so each node has one spawned worker process. `ProfileWorker` starts it with
`ATEN_CPU_CAPABILITY`, the thread count and the fixed cuBLAS workspace in its environment
before torch is imported (`profile_environment`; a multi-process miner's ranks start the
same way, protocol/node/ddp_worker.py); `AsyncWorker` calls it from trio without blocking the
event loop, one job at a time.
"""

from __future__ import annotations

import functools
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from contextlib import contextmanager
from multiprocessing import get_context
from typing import Any, TypeVar

import trio

from protocol.core.errors import VeritrainError
from protocol.core.hardware.observe import observe_profile
from protocol.core.hardware.replay_profile import (
    CUBLAS_WORKSPACE,
    ProfileMismatch,
    ReplayProfile,
    profile_differences,
)
from protocol.node.profile_setup import set_in_process

T = TypeVar("T")
STOP_GRACE_S = 2.0  # an idle worker leaves this fast; a busy one is terminated after it
PARENT_POLL_S = 1.0  # how often a worker checks that the node that started it still runs
_ENV_LOCK = threading.Lock()  # os.environ is process-global: one spawn at a time


def spawn_environment(profile: ReplayProfile) -> dict[str, str]:
    """What a process must find in its environment before it imports torch: the ISA dispatch,
    the OpenMP threads, and cuBLAS's fixed workspace (read when CUDA initialises; harmless on
    CPU)."""
    return {"ATEN_CPU_CAPABILITY": profile.cpu_capability, "OMP_NUM_THREADS": str(profile.threads),
            "CUBLAS_WORKSPACE_CONFIG": CUBLAS_WORKSPACE}


@contextmanager
def profile_environment(profile: ReplayProfile) -> Iterator[None]:
    """`spawn_environment(profile)` in os.environ while processes are started inside (spawned
    children copy it), restored after. Held only while they start: nodes boot workers in parallel."""
    env = spawn_environment(profile)
    with _ENV_LOCK:
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            yield
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


def watch_parent(poll_s: float = PARENT_POLL_S) -> None:
    """In a child process: exit as soon as its parent is gone (a SIGKILLed node leaves no
    430 MB worker behind), and leave Ctrl-C to the parent, which stops its children itself
    (the terminal sends SIGINT to the whole process group)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    parent = os.getppid()

    def poll() -> None:
        while os.getppid() == parent:
            time.sleep(poll_s)
        os._exit(1)

    threading.Thread(target=poll, name="veritrain-parent-watch", daemon=True).start()


def _worker_init(profile: ReplayProfile) -> None:
    watch_parent()
    worker_logging()
    set_in_process(profile)


def worker_logging() -> None:
    """A worker writes to its node's stderr: its log records and warnings (torch's among them)
    go out as the node's own lines, JSON off a terminal, in the format the node was given
    (`VERITRAIN_LOG_FORMAT`, which the node sets for the workers it spawns)."""
    import logging
    import sys

    from protocol.node.json_logs import LOG_FORMAT_ENV, LogFormat, stream_handler

    try:
        fmt = LogFormat(os.environ.get(LOG_FORMAT_ENV, LogFormat.AUTO.value))
    except ValueError:
        fmt = LogFormat.AUTO
    logging.basicConfig(level=logging.WARNING, handlers=[stream_handler(sys.stderr, fmt)], force=True)
    logging.captureWarnings(True)


class ProfileWorker:
    """A spawned worker process that runs functions under a replay profile.

    Use as a context manager; `call(fn, *args)` runs a module-level function in the worker
    (arguments travel between our own processes, never from peers). Entering raises
    ProfileMismatch if the worker cannot run the profile (wrong torch, missing ISA).
    """

    def __init__(self, profile: ReplayProfile) -> None:
        self.profile = profile
        self._pool: ProcessPoolExecutor | None = None
        self._observed: Future[ReplayProfile] | None = None

    def start(self) -> ProfileWorker:
        """Start the process and return at once; `ready()` (or entering) waits for it. The
        devnet starts every node's worker this way, so they import torch while it deploys."""
        if self._pool is not None:
            return self
        with profile_environment(self.profile):
            self._pool = ProcessPoolExecutor(1, get_context("spawn"), _worker_init, (self.profile,))
            # starts the process with the environment set; observes the profile's device
            self._observed = self._pool.submit(observe_profile, self.profile)
        return self

    def ready(self) -> ProfileWorker:
        """Wait until the worker runs; raise ProfileMismatch if it cannot run the profile."""
        self.start()
        assert self._observed is not None
        actual = self._observed.result()
        diffs = profile_differences(self.profile, actual)
        if diffs:
            self.close()
            raise ProfileMismatch(diffs)
        return self

    def __enter__(self) -> ProfileWorker:
        return self.ready()

    def warm(self, fn: Callable[..., Any], *args: Any) -> None:
        """Queue `fn(*args)` without waiting (e.g. loading the dataset ahead of the first job)."""
        self.start()
        assert self._pool is not None
        self._pool.submit(fn, *args)

    def call(self, fn: Callable[..., T], *args: Any) -> T:
        if self._pool is None:
            raise VeritrainError("ProfileWorker used outside its context")
        return self._pool.submit(fn, *args).result()

    def close(self, grace_s: float = STOP_GRACE_S) -> None:
        """Stop the worker: it gets `grace_s` to leave by itself (it does at once when idle),
        then is terminated, then killed; a job still running fails (BrokenProcessPool)."""
        pool = self._pool
        if pool is None:
            return
        procs = list((getattr(pool, "_processes", None) or {}).values())
        pool.shutdown(wait=False, cancel_futures=True)
        _end_processes(procs, grace_s)
        pool.shutdown(wait=True)  # joins the pool's own thread, quick once its process is gone
        self._pool, self._observed = None, None

    def __exit__(self, *exc: object) -> None:
        self.close()


def _end_processes(procs: list[Any], grace_s: float) -> None:
    deadline = time.monotonic() + grace_s
    for proc in procs:
        proc.join(max(0.0, deadline - time.monotonic()))
    for proc in procs:
        if proc.is_alive():
            proc.terminate()
            proc.join(3.0)
        if proc.is_alive():
            proc.kill()
            proc.join()


class AsyncWorker:
    """The profile worker, called from trio without blocking the event loop."""

    def __init__(self, worker: ProfileWorker) -> None:
        self.worker = worker
        self._lock = trio.Lock()  # one job at a time: the worker is one process

    async def __call__(self, fn: Callable[..., T], *args: Any) -> T:
        async with self._lock:
            # abandoned on cancel: a stopping node closes the worker, which ends the job
            return await trio.to_thread.run_sync(functools.partial(self.worker.call, fn, *args),
                                                 abandon_on_cancel=True)  # type: ignore[call-arg]
