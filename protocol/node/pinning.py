"""Pinning a run at deploy: the hashes every node must reproduce, computed under the profile.

Genesis initialisation and the dataset root must come out the same on every node, so they
are computed in a worker process that runs the run's replay profile (docs/ARCHITECTURE.md §6: the ISA and
thread count are fixed before torch is imported), never in the deployer's own process.
"""

from __future__ import annotations

from protocol.config.run_config import RunConfig
from protocol.config.run_setup import Setup, check_genesis_present, training_spec
from protocol.config.run_state import pinned_hashes, with_packed_facts
from protocol.node.worker_pool import ProfileWorker


def prepare(config: RunConfig, worker: ProfileWorker | None = None) -> RunConfig:
    """The run config with the hashes nodes must reproduce filled in (used by deploy),
    computed in `worker` if it runs the config's profile, else in a worker of its own.
    The profile's torch version is this machine's unless the config names one; so is each
    permitted class's (omitted classes take the profile's), written out with the spec. A
    `[training.genesis]` checkpoint gives the genesis model hash of the state loaded from it."""
    spec = with_packed_facts(training_spec(config))  # a packed corpus's tokenizer hash is pinned too
    check_genesis_present(spec)  # before a worker spends seconds importing torch
    profile = Setup(spec, b"").profile
    if worker is not None and worker.profile == profile:
        pinned = worker.ready().call(pinned_hashes, spec)
    else:
        with ProfileWorker(profile) as own:
            pinned = own.call(pinned_hashes, spec)
    genesis = pinned.pop("genesis_model_hash")
    from protocol.core.train.compute_config import ComputeConfig

    # the aggregation rule is written out, so a later default cannot change a deployed run
    compute = {"aggregation": ComputeConfig().aggregation, **spec.compute}
    spec = spec.model_copy(update={**pinned, "compute": compute})
    return config.model_copy(update={"training": spec.model_dump(mode="json"), "genesis_model_hash": genesis})
