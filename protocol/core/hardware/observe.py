"""What replay profile this process is running under, observed (torch).

`observe_profile` reads the torch build, threads, ISA dispatch, default dtype, determinism and,
on CUDA, the device and the process-wide flags; `check_profile` compares that with a declared
profile and raises `ProfileMismatch`, which callers report as a profile problem, never fraud.
Reading only: setting a profile up is the node's (`protocol.node.profile_setup`).
"""

from __future__ import annotations

import os

import torch

from protocol.core.hardware.replay_profile import (
    BF16_AUTOCAST,
    DETERMINISTIC_WORKSPACES,
    ProfileMismatch,
    ReplayProfile,
    is_cuda,
    profile_differences,
)


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
            and os.environ.get("CUBLAS_WORKSPACE_CONFIG") in DETERMINISTIC_WORKSPACES)


def check_profile(declared: ReplayProfile) -> None:
    """Raise ProfileMismatch unless this process runs under `declared`."""
    diffs = profile_differences(declared, observe_profile(declared))
    if diffs:
        raise ProfileMismatch(diffs)
