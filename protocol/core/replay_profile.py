"""The replay profile: the execution settings under which training is bitwise reproducible.

Measured here: the same seed gives identical weights only under the same torch build,
thread count and CPU ISA dispatch. `ATEN_CPU_CAPABILITY` only takes effect if it is in the
environment before torch is imported, so `protocol.node.worker_pool.ProfileWorker` starts a
'spawn' process with it (and the thread count) already set. Running under a different
profile than the declared one raises `ProfileMismatch`, which callers report as a profile
problem, never as fraud. `ReplayProfile` is also the run config's `[training.profile]`
section and each entry of `[[training.classes]]` (validated by pydantic, unknown keys
refused): a hardware class is a replay profile (`protocol.core.hardware_class`).
"""

from __future__ import annotations

import json
from dataclasses import asdict, field
from typing import Annotated, Any

import torch
from pydantic import ConfigDict, Field
from pydantic.dataclasses import dataclass

from protocol.core.errors import VeritrainError
from protocol.core.hashing import Digest, blake3_hash


class ProfileMismatch(VeritrainError):
    """Raised when the running process does not match the declared replay profile.

    `differences` maps each differing field to (declared, actual). A replay under a
    mismatched profile proves nothing either way, so this is never evidence of fraud.
    """

    def __init__(self, differences: dict[str, tuple[Any, Any]]) -> None:
        text = ", ".join(f"{k}: declared {a!r}, running {b!r}" for k, (a, b) in differences.items())
        super().__init__(f"replay profile mismatch ({text})")
        self.differences = differences


@dataclass(frozen=True, config=ConfigDict(extra="forbid"))
class ReplayProfile:
    threads: Annotated[int, Field(ge=1)] = 1  # intra-op threads; 1 vs 2 changes every hash
    cpu_capability: str = "avx2"  # ATEN_CPU_CAPABILITY; avx2 lets avx2 and avx512 hosts agree
    deterministic: bool = True  # torch.use_deterministic_algorithms
    dtype: str = "float32"  # default floating dtype of params and optimizer state
    torch_version: str = field(default_factory=lambda: torch.__version__)  # exact build; pinned by deploy
    device: str = "cpu"  # device the math runs on


def class_id(p: ReplayProfile) -> Digest:
    """The hardware class id of `p` (a class is a profile): the hash of its canonical JSON.
    The domain stays "replay-profile" so deployed profile hashes keep their value."""
    return blake3_hash("replay-profile", json.dumps(asdict(p), sort_keys=True).encode())


profile_hash = class_id  # the name from before hardware classes; deployments pin `profile_hash`


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


def profile_differences(declared: ReplayProfile, actual: ReplayProfile) -> dict[str, tuple[Any, Any]]:
    """Each field where `actual` differs from `declared`, as (declared, actual)."""
    seen = asdict(actual)
    return {k: (v, seen[k]) for k, v in asdict(declared).items() if seen[k] != v}


def check_profile(declared: ReplayProfile) -> None:
    """Raise ProfileMismatch unless this process runs under `declared`."""
    diffs = profile_differences(declared, observe_profile())
    if diffs:
        raise ProfileMismatch(diffs)


def set_in_process(p: ReplayProfile) -> None:
    """Set what can be set in a running process: threads, determinism, default dtype."""
    torch.set_num_threads(p.threads)
    torch.use_deterministic_algorithms(p.deterministic)
    torch.set_default_dtype(getattr(torch, p.dtype))


def apply_profile(p: ReplayProfile) -> None:
    """Set what can be set in-process, then check the rest (ISA, torch build)."""
    set_in_process(p)
    check_profile(p)
