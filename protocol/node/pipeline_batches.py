"""A pipeline's batches (docs/PROTOCOL.md §16.3): the stage miners of a pipeline and the validators
replaying them derive the same (x, y) of every step from the run config and the round's pipeline,
never from what a stage sends: the pages of the pipeline's stage-0 miner (`pipeline_account`)."""

from __future__ import annotations

from collections.abc import Sequence

from torch import Tensor

from protocol.config.run_setup import Setup
from protocol.config.run_state import load_dataset
from protocol.core.pipeline.round_pipelines import pipeline_account
from protocol.core.train.training import RoundTask, batch_fn


def pipeline_batches(setup: Setup, round_: int, members: Sequence[str]) -> list[tuple[Tensor, Tensor]]:
    """The (x, y) of each of the round's H steps, (B, T) int64 each."""
    task = RoundTask(setup.run_seed, round_, pipeline_account(members), setup.model, setup.compute)
    batches = batch_fn(task, load_dataset(setup.spec.dataset))
    return [batches(i) for i in range(setup.compute.inner_steps)]
