"""What this machine is, for the hardware classes it can run (`hardware_class.Host`).

The one place that probes the host: torch's CPU dispatch level, the CPUs this process may use,
and CUDA devices. `protocol.core.hardware.hardware_class` decides from a `Host` alone (pure),
so it, and the run config that imports it, need no torch.
"""

from __future__ import annotations

import dataclasses
import os

import torch

from protocol.core.hardware.hardware_class import Host, runnable_on
from protocol.core.hardware.replay_profile import ReplayProfile


def this_host() -> Host:
    """This machine. The capability is torch's dispatch level, which an `ATEN_CPU_CAPABILITY`
    in this process's environment can lower (the CLI runs without one)."""
    cpu = Host(capability=torch.backends.cpu.get_cpu_capability().lower(), cpu_count=usable_cpus(),
               torch_version=torch.__version__, cuda=torch.cuda.is_available())
    if not cpu.cuda:
        return cpu
    major, minor = torch.cuda.get_device_capability(0)
    model = torch.cuda.get_device_name(0)
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    same = sum(torch.cuda.get_device_name(i) == model for i in range(torch.cuda.device_count()))
    return dataclasses.replace(cpu, gpu_model=model, compute_capability=f"{major}.{minor}",
                               cuda_version=torch.version.cuda or "",
                               cudnn_version="" if cudnn is None else str(cudnn), gpu_count=same)


def usable_cpus() -> int:
    """The CPUs this process may run on (a container or `taskset` may allow fewer than exist)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def runnable_here(p: ReplayProfile) -> tuple[bool, str]:
    """Whether this machine can run class `p`, and if not, why."""
    return runnable_on(p, this_host())


def available_memory() -> int | None:
    """Bytes of memory available to start new work (Linux `MemAvailable`); None where unknown."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None
