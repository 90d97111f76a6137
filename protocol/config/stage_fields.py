"""The checks of a run config's pipeline-stage fields that need no model (PROTOCOL.md §16).

The split itself (`pipeline/stage_split.py`) refuses the rest once the model is known: a Llama
with tied embeddings, or more stages than blocks.
"""

from __future__ import annotations

from protocol.core.errors import ConfigError

DEFAULT_MICROBATCHES = 2


def check_stage_fields(stages: int, microbatches: int, stage_class_lists: int, fan_in: int) -> None:
    """Refuse `stages = 1`, the stage-only fields set without stages (a pinned config carries their
    defaults), per-stage classes for another number of stages, and an aggregation tree with stages."""
    if stages == 1:
        raise ConfigError("[training] stages: 0 (the whole model) or at least 2")
    if not stages:
        stray = [name for name, off in (("microbatches", microbatches != DEFAULT_MICROBATCHES),
                                        ("stage_classes", stage_class_lists > 0)) if off]
        if stray:
            raise ConfigError(f"[training] {', '.join(stray)} apply to a staged run: set stages >= 2 or drop them")
        return
    if stage_class_lists not in (0, stages):
        raise ConfigError(f"[training.stage_classes] has {stage_class_lists} lists for {stages} stages: one per "
                          f"stage, or none (every stage permits [training.classes])")
    if fan_in:
        raise ConfigError("[training] fan_in: a staged run aggregates each stage flat (fan_in = 0)")


def check_microbatches(batch_size: int, microbatches: int) -> None:
    """A step's batch splits into equal microbatches, rows in order."""
    if batch_size % microbatches:
        raise ConfigError(f"[training] microbatches = {microbatches} does not divide [training.compute] "
                          f"batch_size = {batch_size}")
