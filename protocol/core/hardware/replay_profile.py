"""The replay profile: the execution settings under which training is bitwise reproducible.

Measured here: the same seed gives identical weights only under the same torch build,
thread count and CPU ISA dispatch. `ATEN_CPU_CAPABILITY` only takes effect if it is in the
environment before torch is imported, so `protocol.node.worker_pool.ProfileWorker` starts a
'spawn' process with it (and the thread count) already set. Running under a different
profile than the declared one raises `ProfileMismatch` (`protocol.core.hardware.observe.check_profile`),
which callers report as a profile problem, never as fraud. `ReplayProfile` is also the run config's `[training.profile]`
section and each entry of `[[training.classes]]` (validated by pydantic, unknown keys
refused): a hardware class is a replay profile (`protocol.core.hardware.hardware_class`).

On CUDA the profile also pins the GPU model, its compute capability and the CUDA and cuDNN
builds (bitwise replay holds on the same GPU model only), and `protocol.node.profile_setup`
turns on deterministic algorithms and turns off TF32 and cuDNN autotuning. cuBLAS reads
`CUBLAS_WORKSPACE_CONFIG` when CUDA initialises, so the ProfileWorker's spawn environment
carries it too. `world_size` is the number of processes one logical miner trains with
(`protocol.core.train.ddp`); it changes the bits, so it is part of the class.

Torch-free: the run config, the deploy command and the chain read profiles without loading
torch. What this process runs under is observed in `protocol.core.hardware.observe`; setting
it (threads, dtype, determinism, the cuBLAS environment) is the node's (`protocol.node.profile_setup`).
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.metadata
import json
from dataclasses import asdict, field
from typing import Annotated, Any

from pydantic import ConfigDict, Field
from pydantic.dataclasses import dataclass

from protocol.core.crypto.hashing import Digest, blake3_hash
from protocol.core.errors import VeritrainError

# params and AdamW state float32; the forward pass and the loss under torch.autocast(bfloat16)
BF16_AUTOCAST = "bf16-autocast"
CUBLAS_WORKSPACE = ":4096:8"  # a fixed cuBLAS workspace: deterministic cuBLAS needs one
DETERMINISTIC_WORKSPACES = (":4096:8", ":16:8")  # the two settings CUDA documents as deterministic
# the default dtypes a profile may name (torch.set_default_dtype takes floating dtypes only)
FLOAT_DTYPES = ("float32", "float64", "float16", "bfloat16")


@functools.cache
def installed_torch_version() -> str:
    """The installed torch build, from its package metadata: the string `torch.__version__`
    holds (tests/core/test_torch_free.py checks), read without importing torch."""
    return importlib.metadata.version("torch")


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
    torch_version: str = field(default_factory=lambda: installed_torch_version())  # exact build; pinned by deploy
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


def profile_differences(declared: ReplayProfile, actual: ReplayProfile) -> dict[str, tuple[Any, Any]]:
    """Each field where `actual` differs from `declared`, as (declared, actual)."""
    seen = asdict(actual)
    return {k: (v, seen[k]) for k, v in asdict(declared).items() if seen[k] != v}
