"""The boundary slots of one stage's step and the hashes it committed for them (issue 32), torch-free.

In step t a stage s of S receives, per microbatch m, an activation from s - 1 (slot (s - 1, t, m,
FORWARD); none for the first stage, which reads tokens, public data) and the gradient of its output
from s + 1 (slot (s + 1, t, m, BACKWARD); none for the last stage, which reads targets). It sends
an activation to s + 1 (slot (s, t, m, FORWARD); none for the last) and its input's gradient to
s - 1 (slot (s, t, m, BACKWARD); none for the first). The slot of a tensor is the same for its
sender and its receiver, so what s signed as sent and what its neighbour committed as received
meet at one slot key. A segment's boundary root is `boundary.segment_root` over every slot of
its steps, received and sent, with the hash the stage committed for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from protocol.core.crypto.hashing import Digest
from protocol.core.pipeline.boundary import Direction, Slot, segment_root


@dataclass(frozen=True)
class StageSeat:
    """Which stage of which pipeline in which round: what names the slots of its tensors."""

    round: int
    pipeline: int
    stage: int
    stages: int  # S, the pipeline's stage count

    @property
    def first(self) -> bool:
        return self.stage == 0

    @property
    def last(self) -> bool:
        return self.stage == self.stages - 1


@dataclass(frozen=True)
class StepHashes:
    """The hashes (`gpipe.tensor_hash`) a stage committed for one step, per microbatch in order;
    empty where the stage has no such neighbour."""

    received_inputs: tuple[Digest, ...]  # activations from stage - 1
    received_grads: tuple[Digest, ...]  # output gradients from stage + 1
    sent_forward: tuple[Digest, ...]  # activations to stage + 1
    sent_backward: tuple[Digest, ...]  # input gradients to stage - 1


def receiver_stage(slot: Slot) -> int:
    """The stage a slot's tensor goes to (the slot names its sender)."""
    return slot.stage + 1 if slot.direction is Direction.FORWARD else slot.stage - 1


def expected_counts(seat: StageSeat, microbatches: int) -> tuple[int, int, int, int]:
    """How many hashes each field of a `StepHashes` of `seat` holds."""
    left, right = 0 if seat.first else microbatches, 0 if seat.last else microbatches
    return left, right, right, left  # received from the left and the right, sent to the right and the left


def step_slots(seat: StageSeat, step: int, h: StepHashes) -> list[tuple[Slot, Digest]]:
    """Every slot of `seat`'s step `step` (1-based) with its committed hash: received, then sent."""
    r, p, s = seat.round, seat.pipeline, seat.stage
    groups = ((s - 1, Direction.FORWARD, h.received_inputs), (s + 1, Direction.BACKWARD, h.received_grads),
              (s, Direction.FORWARD, h.sent_forward), (s, Direction.BACKWARD, h.sent_backward))
    return [(Slot(r, p, sender, step, m, direction), digest)
            for sender, direction, hashes in groups for m, digest in enumerate(hashes)]


def segment_boundary_root(seat: StageSeat, first_step: int, steps: Sequence[StepHashes]) -> Digest:
    """The boundary root of the segment whose steps are `first_step`, `first_step` + 1, ..."""
    slots = [pair for i, h in enumerate(steps) for pair in step_slots(seat, first_step + i, h)]
    return segment_root(slots)
