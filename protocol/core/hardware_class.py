"""Hardware classes: the replay profiles a run permits, and which of them this machine can run.

A hardware class *is* a `ReplayProfile` (DESIGN.md §8.3): two nodes replay each other bit for
bit only when they run the same class, so the run config lists the permitted classes and a
node trains or replays under exactly one of them. Its id is `class_id`, the hash of the
profile's canonical JSON (the same hash deployments pin as `profile_hash`).

`runnable_on` is pure (a class against a `Host`); `this_host` is the one place that looks at
the machine, so tests can ask about hosts they do not run on.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from protocol.core.errors import ConfigError
from protocol.core.replay_profile import ReplayProfile, class_id

__all__ = ["CAPABILITIES", "MAX_CLASSES", "ClassNotPermitted", "Host", "class_id", "class_mask", "classes_in",
           "default_classes", "find_class",
           "label", "runnable_here", "runnable_on", "short_id", "this_host"]

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


def this_host() -> Host:
    """This machine. The capability is torch's dispatch level, which an `ATEN_CPU_CAPABILITY`
    in this process's environment can lower (the CLI runs without one)."""
    return Host(capability=torch.backends.cpu.get_cpu_capability().lower(), cpu_count=usable_cpus(),
                torch_version=torch.__version__, cuda=torch.cuda.is_available())


def usable_cpus() -> int:
    """The CPUs this process may run on (a container or `taskset` may allow fewer than exist)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def short_id(p: ReplayProfile) -> str:
    """The first 12 hex digits of the class id: enough to tell a run's classes apart."""
    return class_id(p).hex()[:12]


def label(p: ReplayProfile) -> str:
    """A short human name, e.g. "cpu/avx2/1t/float32"; "nondet" marks non-deterministic classes.
    Labels omit the torch version, so two classes may share one: ids never do."""
    parts = [p.device, p.cpu_capability, f"{p.threads}t", p.dtype]
    return "/".join(parts if p.deterministic else [*parts, "nondet"])


def default_classes(profile: ReplayProfile) -> list[ReplayProfile]:
    """The classes a run permits when its config lists none: 1 and 2 threads under avx2 and
    1 thread under avx512, on the profile's torch build, with the run's profile first if it
    is not one of them (it is the class a node runs when it names none)."""
    pinned = profile.torch_version
    three = [ReplayProfile(threads=t, cpu_capability=c, torch_version=pinned)
             for t, c in ((1, "avx2"), (2, "avx2"), (1, "avx512"))]
    return three if profile in three else [profile, *three]


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
    if p.device.split(":")[0] == "cuda":
        reason = "" if host.cuda else "no CUDA device"
    elif p.device != "cpu":
        reason = f"device {p.device!r} is not supported (cpu or cuda)"
    else:
        reason = _cpu_reason(p, host)
    if not reason and p.torch_version != host.torch_version:
        reason = f"needs torch {p.torch_version}, this machine has {host.torch_version}"
    if not reason and not isinstance(getattr(torch, p.dtype, None), torch.dtype):
        reason = f"unknown dtype {p.dtype!r}"
    return not reason, reason


def _cpu_reason(p: ReplayProfile, host: Host) -> str:
    if p.cpu_capability not in CAPABILITIES:
        return f"unknown CPU capability {p.cpu_capability!r} (one of {', '.join(CAPABILITIES)})"
    strongest = host.capability if host.capability in CAPABILITIES else "default"
    if CAPABILITIES.index(p.cpu_capability) > CAPABILITIES.index(strongest):
        return f"needs {p.cpu_capability}, this CPU runs at most {strongest}"
    if p.threads > host.cpu_count:
        return f"needs {p.threads} threads, this machine has {host.cpu_count} CPUs"
    return ""


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


def runnable_here(p: ReplayProfile) -> tuple[bool, str]:
    """Whether this machine can run class `p`, and if not, why."""
    return runnable_on(p, this_host())
