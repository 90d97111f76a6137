"""A node of the no-SIMD class computes the attested genesis state itself: its profile worker
(`ATEN_CPU_CAPABILITY=default`, set before torch loads) gives the hash deploy pins under the
run's avx2 profile, for the devnet's mixed-class micro run (tests/integration/test_devnet_classes.py).
So at round 0 it needs no peer to serve the state (`GlobalState.state_for`)."""

from __future__ import annotations

import dataclasses

import pytest

from protocol.config.run_setup import resolve
from protocol.config.run_state import pinned_hashes
from protocol.core.hardware.replay_profile import ProfileMismatch, ReplayProfile
from protocol.devnet.network import DevnetOptions, run_config_for
from protocol.node.global_model import genesis_blob
from protocol.node.worker_pool import ProfileWorker

NO_SIMD, RUN = ReplayProfile(threads=1, cpu_capability="default"), ReplayProfile(threads=2)
CLASSES = [dataclasses.asdict(p) for p in (ReplayProfile(threads=1), RUN, NO_SIMD)]


def _state_hash(spec) -> str:  # a module-level function: spawned workers import it
    return genesis_blob(spec)[1].hex()


def test_no_simd_class_computes_the_pinned_genesis_hash() -> None:
    opts = DevnetOptions(preset="micro", training={"classes": CLASSES, "profile": dataclasses.asdict(RUN)})
    spec = resolve(run_config_for(opts, [])).spec
    try:
        with ProfileWorker(RUN) as run, ProfileWorker(NO_SIMD) as no_simd:
            pinned = run.call(pinned_hashes, spec)["genesis_model_hash"]  # what deploy puts on chain
            assert no_simd.call(_state_hash, spec) == pinned
            assert run.call(_state_hash, spec) == pinned
    except ProfileMismatch as exc:  # the host lacks AVX2: say so, do not pass silently
        pytest.skip(f"host cannot run the run's avx2 profile: {exc}")
    assert _state_hash(spec) == pinned  # this process: the host's own dispatch level and threads
