"""Which hardware class a node runs: `--hardware-class`, checked against the run before anything starts.

Until class-matched checks arrive (DESIGN.md §8.3: validators replay only miners of their
classes), every node must run the run's default class, the `[training.profile]`: a miner in
another class would be replayed under the wrong profile and could never be checked exactly.
So a permitted class other than the default is refused, not silently run.
"""

from __future__ import annotations

from protocol.config.run_setup import TrainingSpec
from protocol.core.errors import ConfigError
from protocol.core.hardware_class import Host, find_class, label, runnable_on, this_host
from protocol.core.replay_profile import ReplayProfile


class ClassNotRunnable(ConfigError):
    """Raised when a node names a permitted hardware class this machine cannot run."""


class MixedClassesUnsupported(ConfigError):
    """Raised when a node names a permitted class other than the run's default class."""


def choose_class(spec: TrainingSpec, wanted: str | None, host: Host | None = None) -> ReplayProfile:
    """The class a node runs: the run's profile when `wanted` is None (checked later by the
    worker, as before), else the permitted class `wanted` names (label or id), which this
    machine must be able to run and which must, for now, be the run's profile."""
    if wanted is None:
        return spec.profile
    chosen = find_class(spec.classes, wanted)
    ok, why = runnable_on(chosen, host if host is not None else this_host())
    if not ok:
        permitted = ", ".join(label(c) for c in spec.classes)
        raise ClassNotRunnable(f"hardware class {label(chosen)} cannot run here: {why} (permitted: {permitted})")
    if chosen != spec.profile:
        raise MixedClassesUnsupported(
            f"hardware class {label(chosen)} is permitted but is not the run's default class "
            f"{label(spec.profile)}; nodes of other classes arrive with class-matched checks, "
            f"until then every node runs {label(spec.profile)}")
    return chosen
