"""The worker process that runs training, replay and aggregation under the replay profile.

Training holds the GIL for seconds; run on the trio thread it would stall every transfer,
so each node has one spawned worker process. `ProfileWorker` starts it with
`ATEN_CPU_CAPABILITY` and the thread count in its environment before torch is imported;
`AsyncWorker` calls it from trio without blocking the event loop, one job at a time.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from multiprocessing import get_context
from typing import Any, TypeVar

import trio

from protocol.core.errors import VeritrainError
from protocol.core.replay_profile import (
    ProfileMismatch,
    ReplayProfile,
    observe_profile,
    profile_differences,
    set_in_process,
)

T = TypeVar("T")
_ENV_LOCK = threading.Lock()  # os.environ is process-global: one spawn at a time




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
        env = {"ATEN_CPU_CAPABILITY": self.profile.cpu_capability,
               "OMP_NUM_THREADS": str(self.profile.threads)}
        with _ENV_LOCK:  # held only while the process starts: nodes boot their workers in parallel
            saved = {k: os.environ.get(k) for k in env}
            os.environ.update(env)
            try:
                self._pool = ProcessPoolExecutor(1, get_context("spawn"), set_in_process,
                                                 (self.profile,))
                self._observed = self._pool.submit(observe_profile)  # starts the process, env set
            finally:
                for k, v in saved.items():
                    if v is None:
                        os.environ.pop(k, None)
                    else:
                        os.environ[k] = v
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

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool, self._observed = None, None

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncWorker:
    """The profile worker, called from trio without blocking the event loop."""

    def __init__(self, worker: ProfileWorker) -> None:
        self.worker = worker
        self._lock = trio.Lock()  # one job at a time: the worker is one process

    async def __call__(self, fn: Callable[..., T], *args: Any) -> T:
        async with self._lock:
            return await trio.to_thread.run_sync(functools.partial(self.worker.call, fn, *args))
