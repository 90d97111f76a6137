"""Hardware classes: the replay profiles a run permits, and which of them this machine can run.

A hardware class *is* a `ReplayProfile` (docs/PROTOCOL.md §2.6, §10.5): two nodes replay each other bit for
bit only when they run the same class, so the run config lists the permitted classes and a
node trains or replays under exactly one of them. Its id is `class_id`, the hash of the
profile's canonical JSON (the same hash deployments pin as `profile_hash`).

`runnable_on` is pure (a class against a `Host`); `protocol.node.host_probe.this_host` is the
one place that looks at the machine, so tests can ask about hosts they do not run on, and this
module (like the run config that imports it) needs no torch. A CUDA class runs only where the
GPU model, compute capability and CUDA and cuDNN builds are the class's own (bitwise replay
holds on the same GPU model only), with a GPU per process of its world size.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from protocol.core.errors import ConfigError
from protocol.core.hardware.replay_profile import (
    BF16_AUTOCAST,
    FLOAT_DTYPES,
    ReplayProfile,
    class_id,
    is_cuda,
)

__all__ = ["CAPABILITIES", "MAX_CLASSES", "ClassNotPermitted", "Host", "class_id", "class_mask", "classes_in",
           "default_classes", "find_class", "label", "own_classes", "runnable_on", "short_id"]

CAPABILITIES = ("default", "avx2", "avx512")  # ATen's CPU dispatch levels, weakest first
MAX_CLASSES = 16  # classes a run may permit: a class set on chain is a 16-bit mask (contracts/constants.vy)


class ClassNotPermitted(ConfigError):
    """Raised when a hardware class named by id or label is not among the run's permitted classes
    (or a label names more than one of them)."""


@dataclass(frozen=True)
class Host:
    """What decides whether a machine can run a class."""

    capability: str  # the strongest ATen CPU capability the host dispatches to
    cpu_count: int  # logical CPUs this process may use
    torch_version: str  # the installed torch build
    cuda: bool  # whether torch sees a CUDA device
    gpu_model: str = ""  # CUDA device 0's name, as a class names it ("" without CUDA)
    compute_capability: str = ""  # device 0's, "major.minor"
    cuda_version: str = ""  # torch.version.cuda
    cudnn_version: str = ""  # torch.backends.cudnn.version()
    gpu_count: int = 0  # CUDA devices of device 0's model: the most processes a CUDA class may use


def short_id(p: ReplayProfile) -> str:
    """The first 12 hex digits of the class id: enough to tell a run's classes apart."""
    return class_id(p).hex()[:12]


def label(p: ReplayProfile) -> str:
    """A short human name, e.g. "cpu/avx2/1t/float32" or "cuda/nvidia-h200/sm90/bf16-autocast/x2"
    (a world size above 1 is "xN"); "nondet" marks non-deterministic classes. Labels omit the
    torch and CUDA versions (and a CUDA class's CPU threads), so two classes may share one: ids
    never do."""
    if is_cuda(p):
        gpu = "-".join(p.gpu_model.lower().split()) or "any-gpu"
        parts = [p.device, gpu, "sm" + p.compute_capability.replace(".", ""), p.dtype]
    else:
        parts = [p.device, p.cpu_capability, f"{p.threads}t", p.dtype]
    parts += [f"x{p.world_size}"] if p.world_size > 1 else []
    return "/".join(parts if p.deterministic else [*parts, "nondet"])


def default_classes(profile: ReplayProfile) -> list[ReplayProfile]:
    """The classes a run permits when its config lists none: 1 and 2 threads under avx2 and
    1 thread under avx512, on the profile's torch build, with the run's profile first if it
    is not one of them (it is the class a node runs when it names none)."""
    pinned = profile.torch_version
    three = [ReplayProfile(threads=t, cpu_capability=c, torch_version=pinned)
             for t, c in ((1, "avx2"), (2, "avx2"), (1, "avx512"))]
    return three if profile in three else [profile, *three]


def own_classes(host: Host) -> list[ReplayProfile]:
    """The classes `host` runs at its best: every CPU at its strongest ISA, and with CUDA one
    process on its GPU model (deterministic float32, on the host's torch build, avx2 on the CPU
    side where it has it, so GPU hosts with avx2 and avx512 CPUs share the class)."""
    cpu = ReplayProfile(threads=host.cpu_count, cpu_capability=host.capability, torch_version=host.torch_version)
    if not host.cuda:
        return [cpu]
    side = "avx2" if host.capability in ("avx2", "avx512") else host.capability
    gpu = ReplayProfile(threads=1, cpu_capability=side, torch_version=host.torch_version, device="cuda",
                        gpu_model=host.gpu_model,
                        compute_capability=host.compute_capability, cuda_version=host.cuda_version,
                        cudnn_version=host.cudnn_version)
    return [cpu, gpu]


def find_class(classes: Sequence[ReplayProfile], wanted: str) -> ReplayProfile:
    """The class whose label, full id or id prefix (>= 8 hex digits) is `wanted`."""
    key = wanted.strip().lower()
    by_label = [c for c in classes if label(c) == key]
    by_id = [c for c in classes if len(key) >= 8 and class_id(c).hex().startswith(key)]
    hits = by_label or by_id
    permitted = ", ".join(label(c) for c in classes)
    if not hits:
        raise ClassNotPermitted(f"hardware class {wanted!r} is not permitted by this run (permitted: {permitted})")
    if len(hits) > 1:
        ids = ", ".join(short_id(c) for c in hits)
        raise ClassNotPermitted(f"hardware class {wanted!r} names {len(hits)} permitted classes; give an id ({ids})")
    return hits[0]


def runnable_on(p: ReplayProfile, host: Host) -> tuple[bool, str]:
    """Whether `host` can run class `p`, and if not, why (the empty string when it can)."""
    if is_cuda(p):
        reason = _cuda_reason(p, host)
    elif p.device != "cpu":
        reason = f"device {p.device!r} is not supported (cpu or cuda)"
    else:
        reason = _cpu_reason(p, host)
    if not reason and p.torch_version != host.torch_version:
        reason = f"needs torch {p.torch_version}, this machine has {host.torch_version}"
    if not reason and p.dtype not in (BF16_AUTOCAST, *FLOAT_DTYPES):
        reason = f"unknown dtype {p.dtype!r}"
    return not reason, reason


def _cuda_reason(p: ReplayProfile, host: Host) -> str:
    if not host.cuda:
        return "no CUDA device"
    if not (p.gpu_model and p.compute_capability and p.cuda_version):
        return "a CUDA class must name its GPU model, compute capability and CUDA version"
    wanted = (("GPU", p.gpu_model, host.gpu_model), ("compute capability", p.compute_capability, host.compute_capability),
              ("CUDA", p.cuda_version, host.cuda_version), ("cuDNN", p.cudnn_version, host.cudnn_version))
    for what, need, have in wanted:
        if need != have:
            return f"needs {what} {need or 'none'}, this machine has {have or 'none'}"
    if p.world_size > host.gpu_count:
        return f"needs {p.world_size} GPUs ({p.gpu_model}), this machine has {host.gpu_count}"
    return _cpu_reason(p, host)  # the CPU still runs the data, compression and hashing


def _threads_reason(p: ReplayProfile, host: Host) -> str:
    need = p.threads * p.world_size
    if need <= host.cpu_count:
        return ""
    if p.world_size == 1:
        return f"needs {p.threads} threads, this machine has {host.cpu_count} CPUs"
    return f"needs {need} threads ({p.world_size} processes x {p.threads}), this machine has {host.cpu_count} CPUs"


def _cpu_reason(p: ReplayProfile, host: Host) -> str:
    if p.cpu_capability not in CAPABILITIES:
        return f"unknown CPU capability {p.cpu_capability!r} (one of {', '.join(CAPABILITIES)})"
    strongest = host.capability if host.capability in CAPABILITIES else "default"
    if CAPABILITIES.index(p.cpu_capability) > CAPABILITIES.index(strongest):
        return f"needs {p.cpu_capability}, this CPU runs at most {strongest}"
    return _threads_reason(p, host)


def class_mask(classes: Sequence[ReplayProfile], held: Sequence[ReplayProfile]) -> int:
    """The on-chain class set of `held` (`Staking.set_hardware_classes`): bit i is classes[i]."""
    missing = [label(p) for p in held if p not in classes]
    if missing:
        permitted = ", ".join(label(c) for c in classes)
        raise ClassNotPermitted(f"hardware class {', '.join(missing)} is not permitted by this run (permitted: {permitted})")
    return sum(1 << classes.index(p) for p in set(held))


def classes_in(classes: Sequence[ReplayProfile], mask: int) -> list[ReplayProfile]:
    """The permitted classes an on-chain class set names (bits past the list name nothing)."""
    return [c for i, c in enumerate(classes) if mask >> i & 1]
