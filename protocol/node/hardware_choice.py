"""Which hardware class a node runs: `--hardware-class`, checked against the run before anything starts.

A node may run any permitted class this machine can run: validators replay exactly only the
miners of their own class (docs/PROTOCOL.md §10.5), and a class nobody holds is
checked in tolerance mode. A class not permitted, or not runnable here, is refused with the
list of permitted ones.
"""

from __future__ import annotations

from protocol.config.run_setup import TrainingSpec
from protocol.core.errors import ConfigError
from protocol.core.hardware.hardware_class import Host, find_class, label, runnable_on
from protocol.core.hardware.replay_profile import ReplayProfile


class ClassNotRunnable(ConfigError):
    """Raised when a node names a permitted hardware class this machine cannot run."""


def choose_class(spec: TrainingSpec, wanted: str | None, host: Host | None = None) -> ReplayProfile:
    """The class a node runs: the run's profile when `wanted` is None (checked later by the
    worker, as before), else the permitted class `wanted` names (label or id), which this
    machine must be able to run."""
    if wanted is None:
        return spec.profile
    chosen = find_class(spec.classes, wanted)
    if host is None:
        from protocol.node.host_probe import (
            this_host,  # imports torch: only when a class is asked for
        )

        host = this_host()
    ok, why = runnable_on(chosen, host)
    if not ok:
        permitted = ", ".join(label(c) for c in spec.classes)
        raise ClassNotRunnable(f"hardware class {label(chosen)} cannot run here: {why} (permitted: {permitted})")
    return chosen
