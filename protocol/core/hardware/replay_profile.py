"""The replay profile: the execution settings under which training is bitwise reproducible.

Measured here: the same seed gives identical weights only under the same torch build,
thread count and CPU ISA dispatch. `ATEN_CPU_CAPABILITY` only takes effect if it is in the
environment before torch is imported, so `protocol.node.worker_pool.ProfileWorker` starts a
'spawn' process with it (and the thread count) already set. Running under a different
profile than the declared one raises `ProfileMismatch`, which callers report as a profile
problem, never as fraud. `ReplayProfile` is also the run config's `[training.profile]`
section and each entry of `[[training.classes]]` (validated by pydantic, unknown keys
refused): a hardware class is a replay profile (`protocol.core.hardware.hardware_class`).

On CUDA the profile also pins the GPU model, its compute capability and the CUDA and cuDNN
builds (bitwise replay holds on the same GPU model only), and `set_in_process` turns on
deterministic algorithms and turns off TF32 and cuDNN autotuning. cuBLAS reads
`CUBLAS_WORKSPACE_CONFIG` when CUDA initialises, so the ProfileWorker's spawn environment
carries it too. `world_size` is the number of processes one logical miner trains with
(`protocol.core.train.ddp`); it changes the bits, so it is part of the class.
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import asdict, field
from typing import Annotated, Any

import torch
from pydantic import ConfigDict, Field
from pydantic.dataclasses import dataclass

from protocol.core.crypto.hashing import Digest, blake3_hash
from protocol.core.errors import VeritrainError

# params and AdamW state float32; the forward pass and the loss under torch.autocast(bfloat16)
BF16_AUTOCAST = "bf16-autocast"
CUBLAS_WORKSPACE = ":4096:8"  # a fixed cuBLAS workspace: deterministic cuBLAS needs one
_DETERMINISTIC_WORKSPACES = (":4096:8", ":16:8")  # the two settings CUDA documents as deterministic


class ProfileMismatch(VeritrainError):
    """Raised when the running process does not match the declared replay profile.

    `differences` maps each differing field to (declared, actual). A replay under a
    mismatched profile proves nothing either way, so this is never evidence of fraud.
    """

    def __init__(self, differences: dict[str, tuple[Any, Any]]) -> None:
        text = ", ".join(f"{k}: declared {a!r}, running {b!r}" for k, (a, b) in differences.items())
        super().__init__(f"replay profile mismatch ({text})")
        self.differences = differences

    def __reduce__(self) -> tuple[Any, ...]:  # crosses from a worker process with its differences
        return (type(self), (self.differences,))


@dataclass(frozen=True, config=ConfigDict(extra="forbid"))
class ReplayProfile:
    threads: Annotated[int, Field(ge=1)] = 1  # intra-op threads (per process); 1 vs 2 changes every hash
    cpu_capability: str = "avx2"  # ATEN_CPU_CAPABILITY; avx2 lets avx2 and avx512 hosts agree
    deterministic: bool = True  # torch.use_deterministic_algorithms (on CUDA also TF32 and autotuning off)
    dtype: str = "float32"  # default floating dtype of params and optimizer state, or BF16_AUTOCAST
    torch_version: str = field(default_factory=lambda: torch.__version__)  # exact build; pinned by deploy
    device: str = "cpu"  # device the math runs on: "cpu" or "cuda"
    # --- added with CUDA and multi-process miners: left out of `class_id` at their defaults ---
    world_size: Annotated[int, Field(ge=1)] = 1  # processes of one logical miner (torch.distributed)
    gpu_model: str = ""  # torch.cuda.get_device_name, e.g. "NVIDIA H200"; "" on CPU
    compute_capability: str = ""  # torch.cuda.get_device_capability as "major.minor", e.g. "9.0"
    cuda_version: str = ""  # torch.version.cuda, e.g. "12.4"
    cudnn_version: str = ""  # torch.backends.cudnn.version(), e.g. "90100"


# Fields added after profile hashes were deployed. Each enters the canonical JSON only when it
# differs from its default, so every profile that existed before keeps its id. A field added
# later joins this tuple (its default must be the behaviour from before it existed).
LATER_FIELDS = ("world_size", "gpu_model", "compute_capability", "cuda_version", "cudnn_version")
_DEFAULTS = {f.name: f.default for f in dataclasses.fields(ReplayProfile) if f.name in LATER_FIELDS}


def canonical_fields(p: ReplayProfile) -> dict[str, Any]:
    """The fields `class_id` hashes: every field, less the LATER_FIELDS at their defaults."""
    return {k: v for k, v in asdict(p).items() if not (k in _DEFAULTS and v == _DEFAULTS[k])}


def class_id(p: ReplayProfile) -> Digest:
    """The hardware class id of `p` (a class is a profile): the hash of its canonical JSON,
    `json.dumps(canonical_fields(p), sort_keys=True)`. A CPU profile of one process hashes the
    six original fields exactly as before CUDA fields existed. The domain stays
    "replay-profile" so deployed profile hashes keep their value."""
    return blake3_hash("replay-profile", json.dumps(canonical_fields(p), sort_keys=True).encode())


profile_hash = class_id  # the name from before hardware classes; deployments pin `profile_hash`


def is_cuda(p: ReplayProfile) -> bool:
    return p.device.split(":")[0] == "cuda"


def storage_dtype(p: ReplayProfile) -> str:
    """The dtype params and optimizer state are kept in (float32 under bf16 autocast)."""
    return "float32" if p.dtype == BF16_AUTOCAST else p.dtype


def observe_profile(declared: ReplayProfile | None = None) -> ReplayProfile:
    """The profile this process is actually running under.

    What a process chooses rather than has comes from `declared` (default: one CPU process):
    the device it is about to use (if it exists here), bf16 autocast over a float32 default
    dtype, and the world size outside a process group (the launcher starts exactly that many
    ranks; inside a group torch.distributed's is observed). The CUDA fields are observed on
    a CUDA device, and there `deterministic` also needs TF32 and autotuning off and a fixed
    cuBLAS workspace."""
    want = declared if declared is not None else ReplayProfile()
    cuda = is_cuda(want) and torch.cuda.is_available()
    dtype = str(torch.get_default_dtype()).removeprefix("torch.")
    if want.dtype == BF16_AUTOCAST and dtype == "float32":
        dtype = BF16_AUTOCAST
    deterministic = torch.are_deterministic_algorithms_enabled() and (not cuda or cuda_flags_deterministic())
    return ReplayProfile(
        threads=torch.get_num_threads(),
        cpu_capability=torch.backends.cpu.get_cpu_capability().lower(),
        deterministic=deterministic,
        dtype=dtype,
        torch_version=torch.__version__,
        device=want.device if cuda else "cpu",
        world_size=_world_size(want.world_size),
        **(_cuda_fields(want.device) if cuda else {}),
    )


def _world_size(declared: int) -> int:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_world_size()
    return declared


def _cuda_fields(device: str) -> dict[str, str]:
    index = torch.device(device).index
    index = torch.cuda.current_device() if index is None else index
    major, minor = torch.cuda.get_device_capability(index)
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    return {"gpu_model": torch.cuda.get_device_name(index), "compute_capability": f"{major}.{minor}",
            "cuda_version": torch.version.cuda or "", "cudnn_version": "" if cudnn is None else str(cudnn)}


def cuda_flags_deterministic() -> bool:
    """Whether the process-wide CUDA settings allow bitwise replay (readable without a GPU)."""
    return (not torch.backends.cuda.matmul.allow_tf32 and not torch.backends.cudnn.allow_tf32
            and not torch.backends.cudnn.benchmark
            and os.environ.get("CUBLAS_WORKSPACE_CONFIG") in _DETERMINISTIC_WORKSPACES)


def set_cuda_flags(deterministic: bool) -> None:
    """TF32 off and cuDNN autotuning off (their choice of kernels changes bits), cuDNN
    deterministic as asked, and the fixed cuBLAS workspace if CUDA has not read it yet."""
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = deterministic
    if os.environ.get("CUBLAS_WORKSPACE_CONFIG") not in _DETERMINISTIC_WORKSPACES and not torch.cuda.is_initialized():
        os.environ["CUBLAS_WORKSPACE_CONFIG"] = CUBLAS_WORKSPACE  # too late once CUDA is up: check_profile says so


def profile_differences(declared: ReplayProfile, actual: ReplayProfile) -> dict[str, tuple[Any, Any]]:
    """Each field where `actual` differs from `declared`, as (declared, actual)."""
    seen = asdict(actual)
    return {k: (v, seen[k]) for k, v in asdict(declared).items() if seen[k] != v}


def check_profile(declared: ReplayProfile) -> None:
    """Raise ProfileMismatch unless this process runs under `declared`."""
    diffs = profile_differences(declared, observe_profile(declared))
    if diffs:
        raise ProfileMismatch(diffs)


def set_in_process(p: ReplayProfile) -> None:
    """Set what can be set in a running process: threads, determinism, default dtype, and on
    CUDA the TF32, autotuning and cuBLAS workspace settings."""
    torch.set_num_threads(p.threads)
    torch.use_deterministic_algorithms(p.deterministic)
    torch.set_default_dtype(getattr(torch, storage_dtype(p)))
    if is_cuda(p):
        set_cuda_flags(p.deterministic)


def apply_profile(p: ReplayProfile) -> None:
    """Set what can be set in-process, then check the rest (ISA, torch build, GPU)."""
    set_in_process(p)
    check_profile(p)
