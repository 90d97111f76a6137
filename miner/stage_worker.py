"""What a stage miner's worker process runs (docs/PROTOCOL.md §16.4): one `StageDriver` per stage
round, kept in the worker between calls, so the stage computes under the class's replay profile
while the node process moves its tensors (`miner/stage_round.py`). The worker is a single process
(`ProfileWorker`), so its module state is the same for every call."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from protocol.core.model.config import ModelConfig
from protocol.core.model.gpt import Params, load_params
from protocol.core.pipeline.gpipe import fresh_state
from protocol.core.pipeline.stage_driver import StageDriver
from protocol.core.pipeline.stage_module import StageModule
from protocol.core.pipeline.stage_slots import StageSeat
from protocol.core.pipeline.stage_split import split_model
from protocol.core.train.compute_config import ComputeConfig

_DRIVERS: dict[StageSeat, StageDriver] = {}
DRIVER_CALLS = ("forward", "backward", "finish", "outcome")


@dataclass(frozen=True)
class StageJob:
    """One stage's round: the model, the stage's seat, its starting parameters and the
    pipeline's batches (public data), between the node and its own worker only."""

    model: ModelConfig
    seat: StageSeat
    cfg: ComputeConfig
    count: int
    params: Params
    batches: list[tuple[Tensor, Tensor]]


def stage_open(job: StageJob) -> None:
    """Build the stage and its driver in this worker."""
    module = StageModule(job.model, split_model(job.model, job.seat.stages), job.seat.stage)
    load_params(module, job.params)
    _DRIVERS[job.seat] = StageDriver(module, fresh_state(module), job.seat, job.cfg, job.count, job.batches)


def register_driver(seat: StageSeat, driver: StageDriver) -> None:
    """Keep `driver` for `seat`'s round in this worker (a node's `open_stage_round`)."""
    _DRIVERS[seat] = driver


def take_driver(seat: StageSeat) -> StageDriver:
    """The open round's driver, which no later call reaches (`close_stage_round`)."""
    return _DRIVERS.pop(seat)


def stage_nudge(seat: StageSeat, scale: float) -> None:
    """Add `scale` to every parameter of `seat`'s stage (a lazy stage, devnet and tests only)."""
    with torch.no_grad():
        for p in _DRIVERS[seat].module.parameters():
            p.add_(scale)


def stage_call(seat: StageSeat, method: str, *args: Any) -> Any:
    """`StageDriver.<method>(*args)` of the open round `seat`; `outcome` closes it."""
    if method not in DRIVER_CALLS:
        raise ValueError(f"a stage driver has no call {method!r}")
    if method == "outcome":
        return _DRIVERS.pop(seat).outcome()
    return getattr(_DRIVERS[seat], method)(*args)
