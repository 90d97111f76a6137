"""Putting this process under a replay profile: the writes (threads, determinism, default dtype,
the CUDA flags and the cuBLAS environment variable) that `protocol.core.hardware.observe`
then reads back. The core only declares and observes profiles; the node sets them.
"""

from __future__ import annotations

import os

import torch

from protocol.core.hardware.observe import check_profile
from protocol.core.hardware.replay_profile import (
    CUBLAS_WORKSPACE,
    DETERMINISTIC_WORKSPACES,
    ReplayProfile,
    is_cuda,
    storage_dtype,
)


def set_cuda_flags(deterministic: bool) -> None:
    """TF32 off and cuDNN autotuning off (their choice of kernels changes bits), cuDNN
    deterministic as asked, and the fixed cuBLAS workspace if CUDA has not read it yet."""
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = deterministic
    if os.environ.get("CUBLAS_WORKSPACE_CONFIG") not in DETERMINISTIC_WORKSPACES and not torch.cuda.is_initialized():
        os.environ["CUBLAS_WORKSPACE_CONFIG"] = CUBLAS_WORKSPACE  # too late once CUDA is up: check_profile says so


def set_in_process(p: ReplayProfile) -> None:
    """Set what can be set in a running process: threads, determinism, default dtype, and on
    CUDA the TF32, autotuning and cuBLAS workspace settings."""
    torch.set_num_threads(p.threads)
    # what torch.use_deterministic_algorithms does but for also setting torch.compile's (inductor's)
    # flag, whose import costs 1.5 s of every worker's start; veritrain never compiles
    torch._C._set_deterministic_algorithms(p.deterministic, warn_only=False)
    torch.set_default_dtype(getattr(torch, storage_dtype(p)))
    if is_cuda(p):
        set_cuda_flags(p.deterministic)


def apply_profile(p: ReplayProfile) -> None:
    """Set what can be set in-process, then check the rest (ISA, torch build, GPU)."""
    set_in_process(p)
    check_profile(p)
