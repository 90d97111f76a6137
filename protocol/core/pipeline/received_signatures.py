"""The sender's signatures a stage keeps for what it received, and what they prove (docs/PROTOCOL.md
§16.6), torch-free.

With each challenged segment a stage serves, for every tensor it received, its sender's signature
of that tensor's hash for that slot (the stage link keeps them: `StageInbox.evidence`). A received
hash the stage committed without a valid signature of it by its sender for that slot is the
stage's **misreport** (attribution rule 3): it claims, and trained on, a tensor nobody is shown to
have sent it. An honest stage holds a signature for every tensor it received, so it is never
named; a stage cannot shift its own lie onto its neighbour, whose key it cannot sign with.

The same signatures bind the sender: a tensor a stage signed for a slot whose hash is not the one it
committed as sent is its **contradicted send** (`contradicted_sends`). Without that check a sender
could feed its neighbour any tensor while committing, and replaying exactly, the one it computed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from protocol.core.errors import SignatureError
from protocol.core.pipeline.attribution import Domain
from protocol.core.pipeline.boundary import Direction, Slot, verify_boundary
from protocol.core.pipeline.stage_slots import StageSeat, StepHashes

SIGNATURE_BYTES = 64  # ed25519


@dataclass(frozen=True)
class StepSignatures:
    """The senders' signatures of one step's received tensors, per microbatch in order."""

    inputs: tuple[bytes, ...]  # of the activations from stage - 1 (none for the first stage)
    grads: tuple[bytes, ...]  # of the output gradients from stage + 1 (none for the last)


def misreported_slots(seat: StageSeat, first_step: int, hashes: Sequence[StepHashes],
                      signatures: Sequence[StepSignatures], neighbours: tuple[bytes | None, bytes | None],
                      domain: Domain) -> list[Slot]:
    """The received slots of steps `first_step`, `first_step` + 1, ... whose committed hash is not
    signed by its sender (`neighbours`: the node keys of stage - 1 and stage + 1, None at an end)."""
    out = []
    for i, (h, sig) in enumerate(zip(hashes, signatures, strict=True)):
        groups = ((seat.stage - 1, Direction.FORWARD, h.received_inputs, sig.inputs, neighbours[0]),
                  (seat.stage + 1, Direction.BACKWARD, h.received_grads, sig.grads, neighbours[1]))
        for sender, direction, committed, sigs, key in groups:
            for m, digest in enumerate(committed):
                slot = Slot(seat.round, seat.pipeline, sender, first_step + i, m, direction)
                if not _signed(key, sigs[m] if m < len(sigs) else b"", domain, slot, digest):
                    out.append(slot)
    return out


def _signed(key: bytes | None, signature: bytes, domain: Domain, slot: Slot, digest: bytes) -> bool:
    if key is None:
        return False
    try:
        verify_boundary(key, signature, domain.chain_id, domain.contract, slot, digest)
    except SignatureError:
        return False
    return True


@dataclass(frozen=True)
class NeighbourSegment:
    """What a neighbour served for the same segment: the hashes it committed and the signatures it holds."""

    hashes: Sequence[StepHashes]
    signatures: Sequence[StepSignatures]


def contradicted_sends(seat: StageSeat, first_step: int, own: Sequence[StepHashes], sender_key: bytes,
                       neighbours: tuple[NeighbourSegment | None, NeighbourSegment | None], domain: Domain) -> list[Slot]:
    """The slots of steps `first_step`, ... that stage `seat.stage` sent with its signature of a
    hash other than the one it committed as sent (`own`), as its neighbours' served segments show
    (stage - 1's and stage + 1's, None where there is none or it served nothing). A signature by
    the stage's own key is the evidence: whoever shows it, the stage signed one tensor and committed
    another (equivocation between its link and its commit). A neighbour's hash without a valid
    signature of the stage proves nothing here (`misreported_slots` names that neighbour)."""
    out = []
    below, above = neighbours
    for i, mine in enumerate(own):
        step = first_step + i
        if above is not None:  # activations sent forward, as stage + 1 received them
            got = above.hashes[i]
            out += _contradicted(seat, step, Direction.FORWARD, mine.sent_forward, got.received_inputs,
                                 above.signatures[i].inputs, sender_key, domain)
        if below is not None:  # input gradients sent backward, as stage - 1 received them
            got = below.hashes[i]
            out += _contradicted(seat, step, Direction.BACKWARD, mine.sent_backward, got.received_grads,
                                 below.signatures[i].grads, sender_key, domain)
    return out


def _contradicted(seat: StageSeat, step: int, direction: Direction, committed: Sequence[bytes],
                  received: Sequence[bytes], signatures: Sequence[bytes], key: bytes, domain: Domain) -> list[Slot]:
    out = []
    for m, digest in enumerate(received):
        slot = Slot(seat.round, seat.pipeline, seat.stage, step, m, direction)
        mine = committed[m] if m < len(committed) else None
        if digest != mine and _signed(key, signatures[m] if m < len(signatures) else b"", domain, slot, digest):
            out.append(slot)
    return out
