"""The replay profile: the execution settings under which training is bitwise reproducible.

Measured here (DESIGN §2): the same seed gives identical weights only under the same torch
build, thread count and CPU ISA dispatch. `ATEN_CPU_CAPABILITY` only takes effect if it is
in the environment before torch is imported, so `ProfileWorker` starts a 'spawn' process
with it (and the thread count) already set. Running under a different profile than the
declared one raises `ProfileMismatch`, which callers report as a profile problem, never as
fraud.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from multiprocessing import get_context
from typing import Any, TypeVar

import torch

from protocol.core.errors import VeritrainError
from protocol.core.hashing import Digest, blake3_hash

T = TypeVar("T")
_ENV_LOCK = threading.Lock()  # os.environ is process-global: one spawn at a time


class ProfileMismatch(VeritrainError):
    """Raised when the running process does not match the declared replay profile.

    `differences` maps each differing field to (declared, actual). A replay under a
    mismatched profile proves nothing either way, so this is never evidence of fraud.
    """

    def __init__(self, differences: dict[str, tuple[Any, Any]]) -> None:
        text = ", ".join(f"{k}: declared {a!r}, running {b!r}" for k, (a, b) in differences.items())
        super().__init__(f"replay profile mismatch ({text})")
        self.differences = differences


@dataclass(frozen=True)
class ReplayProfile:
    threads: int = 1  # intra-op threads; 1 vs 2 changes every hash
    cpu_capability: str = "avx2"  # ATEN_CPU_CAPABILITY; avx2 lets avx2 and avx512 hosts agree
    deterministic: bool = True  # torch.use_deterministic_algorithms
    dtype: str = "float32"  # default floating dtype of params and optimizer state
    torch_version: str = field(default_factory=lambda: torch.__version__)  # exact build
    device: str = "cpu"  # device the math runs on


def profile_hash(p: ReplayProfile) -> Digest:
    return blake3_hash("replay-profile", json.dumps(asdict(p), sort_keys=True).encode())


def observe_profile() -> ReplayProfile:
    """The profile this process is actually running under."""
    return ReplayProfile(
        threads=torch.get_num_threads(),
        cpu_capability=torch.backends.cpu.get_cpu_capability().lower(),
        deterministic=torch.are_deterministic_algorithms_enabled(),
        dtype=str(torch.get_default_dtype()).removeprefix("torch."),
        torch_version=torch.__version__,
        device="cpu",
    )


def check_profile(declared: ReplayProfile) -> None:
    """Raise ProfileMismatch unless this process runs under `declared`."""
    actual = asdict(observe_profile())
    diffs = {k: (v, actual[k]) for k, v in asdict(declared).items() if actual[k] != v}
    if diffs:
        raise ProfileMismatch(diffs)


def apply_profile(p: ReplayProfile) -> None:
    """Set what can be set in-process (threads, determinism, dtype), then check the rest."""
    torch.set_num_threads(p.threads)
    torch.use_deterministic_algorithms(p.deterministic)
    torch.set_default_dtype(getattr(torch, p.dtype))
    check_profile(p)


def _init_worker(p: ReplayProfile) -> None:
    torch.set_num_threads(p.threads)
    torch.use_deterministic_algorithms(p.deterministic)
    torch.set_default_dtype(getattr(torch, p.dtype))


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
                self._pool = ProcessPoolExecutor(1, get_context("spawn"), _init_worker,
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
        declared, seen = asdict(self.profile), asdict(actual)
        diffs = {k: (v, seen[k]) for k, v in declared.items() if seen[k] != v}
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
