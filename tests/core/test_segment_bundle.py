"""A stage's challenged segment served as one blob (PROTOCOL.md §16.5): it decodes to what the
stage kept and replays exactly, and every received hash is signed by its sender; a blob of another
stage or segment, with another tensor set or shape, or over the cap is refused with BlobFormatError
before any replay. A stage that commits a received hash its sender did not sign is named for it
(PROTOCOL.md §16.6), and its honest neighbours never are."""

from __future__ import annotations

import dataclasses

import pytest
import safetensors.torch
import torch

from protocol.core.checkpoint.format import BlobFormatError
from protocol.core.crypto.signing import NodeIdentity
from protocol.core.model.config import preset
from protocol.core.model.gpt import init_params, load_params
from protocol.core.pipeline.attribution import Domain
from protocol.core.pipeline.boundary import Direction, Slot, sign_boundary
from protocol.core.pipeline.gpipe import fresh_state
from protocol.core.pipeline.received_signatures import (
    NeighbourSegment,
    StepSignatures,
    contradicted_sends,
    misreported_slots,
)
from protocol.core.pipeline.segment_bundle import (
    META_KEY,
    ServedBundle,
    decode_segment,
    encode_segment,
    max_segment_bytes,
)
from protocol.core.pipeline.stage_module import StageModule, stage_params
from protocol.core.pipeline.stage_record import record_pipeline
from protocol.core.pipeline.stage_replay import (
    ServedSegment,
    StageReplayStatus,
    StageTask,
    replay_stage_segment,
)
from protocol.core.pipeline.stage_slots import receiver_stage
from protocol.core.pipeline.stage_split import split_model
from protocol.core.train.compute_config import ComputeConfig

MODEL = dataclasses.replace(preset("llama-micro"), n_layer=3)
SPLIT = split_model(MODEL, 3)
CFG = ComputeConfig(inner_steps=4, checkpoint_every=2)
ROWS, COUNT, K = 4, 2, 2


def _round():
    params = init_params(MODEL, 2)
    modules = [StageModule(MODEL, SPLIT, s) for s in range(3)]
    for s, m in enumerate(modules):
        load_params(m, stage_params(params, SPLIT, s))
    gen = torch.Generator().manual_seed(1)
    data = [(torch.randint(0, MODEL.vocab_size, (ROWS * COUNT, MODEL.block_size), generator=gen),
             torch.randint(0, MODEL.vocab_size, (ROWS * COUNT, MODEL.block_size), generator=gen)) for _ in range(4)]
    return record_pipeline(modules, [fresh_state(m) for m in modules], data, CFG, COUNT, 1, 0), data


RECORDS, DATA = _round()


KEYS = [NodeIdentity.generate() for _ in range(3)]
DOMAIN = Domain(31337, bytes(range(20)))


def _signatures(s: int, j: int) -> tuple[StepSignatures, ...]:
    """What stage s's link kept: its neighbours' signatures of what they sent it in segment j."""
    seat, out = RECORDS[s].seat, []
    for i, io in enumerate(RECORDS[s].segment(j)):
        step = j * K + i + 1

        def signed(sender: int, direction: Direction, hashes, step: int = step) -> tuple[bytes, ...]:
            return tuple(sign_boundary(KEYS[sender], DOMAIN.chain_id, DOMAIN.contract,
                                       Slot(seat.round, seat.pipeline, sender, step, m, direction), h)
                         for m, h in enumerate(hashes))
        out.append(StepSignatures(signed(s - 1, Direction.FORWARD, io.hashes.received_inputs),
                                  signed(s + 1, Direction.BACKWARD, io.hashes.received_grads)))
    return tuple(out)


def _served(s: int, j: int) -> ServedSegment:
    steps = RECORDS[s].segment(j)
    return ServedSegment(RECORDS[s].starts[j], tuple(io.hashes for io in steps), tuple(io.received for io in steps))


def _bundle(s: int, j: int) -> ServedBundle:
    return ServedBundle(_served(s, j), _signatures(s, j))


def _neighbours(s: int) -> tuple[bytes | None, bytes | None]:
    return (KEYS[s - 1].public_key if s > 0 else None, KEYS[s + 1].public_key if s < 2 else None)


@pytest.mark.parametrize("s", [0, 1, 2])
def test_a_served_segment_decodes_to_what_the_stage_kept_and_replays_exactly(s):
    seat, j = RECORDS[s].seat, 1
    blob = encode_segment(seat, _bundle(s, j), COUNT)
    assert len(blob) <= max_segment_bytes(MODEL, SPLIT, seat, K, COUNT, ROWS)
    assert encode_segment(seat, _bundle(s, j), COUNT) == blob  # deterministic bytes
    bundle = decode_segment(blob, MODEL, SPLIT, seat, K, COUNT, ROWS, start_step=j * K)
    served = bundle.segment
    assert served.hashes == _served(s, j).hashes and bundle.signatures == _signatures(s, j)
    assert misreported_slots(seat, j * K + 1, served.hashes, bundle.signatures, _neighbours(s), DOMAIN) == []
    result = replay_stage_segment(StageTask(MODEL, SPLIT, CFG, COUNT, seat), RECORDS[s].trace, j, served,
                                  DATA[j * K:(j + 1) * K])
    assert result.status is StageReplayStatus.EXACT


def test_a_blob_of_another_stage_segment_form_or_size_is_refused():
    seat = RECORDS[1].seat
    blob = encode_segment(seat, _bundle(1, 0), COUNT)
    with pytest.raises(BlobFormatError, match="another stage or segment"):
        decode_segment(blob, MODEL, SPLIT, seat, K, COUNT, ROWS, start_step=2)  # segment 0 offered as 1
    with pytest.raises(BlobFormatError, match="another stage or segment"):
        decode_segment(blob, MODEL, SPLIT, RECORDS[2].seat, K, COUNT, ROWS, start_step=0)
    tensors = safetensors.torch.load(blob)
    extra = safetensors.torch.save({**tensors, "junk": torch.zeros(1)}, metadata={META_KEY: "stage 1/3 step 0 warm 0"})
    with pytest.raises(BlobFormatError, match="other tensors"):
        decode_segment(extra, MODEL, SPLIT, seat, K, COUNT, ROWS, start_step=0)
    narrow = {**tensors, "in/0/0": torch.zeros(ROWS, MODEL.block_size, MODEL.n_embd - 1)}
    with pytest.raises(BlobFormatError, match="in/0/0"):
        decode_segment(safetensors.torch.save(narrow, metadata={META_KEY: "stage 1/3 step 0 warm 0"}),
                       MODEL, SPLIT, seat, K, COUNT, ROWS, start_step=0)
    with pytest.raises(BlobFormatError, match="exceeds the cap"):
        decode_segment(blob + b"\0" * max_segment_bytes(MODEL, SPLIT, seat, K, COUNT, ROWS), MODEL, SPLIT, seat, K,
                       COUNT, ROWS, start_step=0)


def test_a_received_hash_its_sender_did_not_sign_is_the_receivers_misreport():
    """Stage 1 commits, for step 2's microbatch 1 from stage 0, a hash stage 0 never signed: only
    that slot is named, against stage 1 (the receiver); a signature by another key proves nothing."""
    seat, served, sigs = RECORDS[1].seat, _served(1, 0), list(_signatures(1, 0))
    lie = bytes(32)
    h = served.hashes[1]
    hashes = list(served.hashes)
    hashes[1] = dataclasses.replace(h, received_inputs=(h.received_inputs[0], lie))
    named = misreported_slots(seat, 1, hashes, sigs, _neighbours(1), DOMAIN)
    assert named == [Slot(seat.round, seat.pipeline, 0, 2, 1, Direction.FORWARD)]
    assert {receiver_stage(slot) for slot in named} == {1}
    forged = sign_boundary(KEYS[1], DOMAIN.chain_id, DOMAIN.contract, named[0], lie)  # signed by itself
    sigs[1] = StepSignatures((sigs[1].inputs[0], forged), sigs[1].grads)
    assert misreported_slots(seat, 1, hashes, sigs, _neighbours(1), DOMAIN) == named


def _as_neighbour(s: int, j: int, sigs=None, hashes=None) -> NeighbourSegment:
    served = _served(s, j)
    return NeighbourSegment(hashes or served.hashes, sigs or _signatures(s, j))


def test_a_tensor_a_stage_signed_but_did_not_commit_as_sent_is_its_contradicted_send():
    """Stage 1 committed what it computed but signed another activation for stage 2 (step 2,
    microbatch 0): stage 2's signatures name that slot against stage 1; honest neighbours name
    nothing, and a receiver's own signature of another hash proves nothing against its sender."""
    seat, own = RECORDS[1].seat, _served(1, 0).hashes
    honest = (_as_neighbour(0, 0), _as_neighbour(2, 0))
    assert contradicted_sends(seat, 1, own, KEYS[1].public_key, honest, DOMAIN) == []
    slot = Slot(seat.round, seat.pipeline, 1, 2, 0, Direction.FORWARD)
    forked = bytes([own[1].sent_forward[0][0] ^ 1]) + own[1].sent_forward[0][1:]
    hashes, sigs = list(_served(2, 0).hashes), list(_signatures(2, 0))
    hashes[1] = dataclasses.replace(hashes[1], received_inputs=(forked, *hashes[1].received_inputs[1:]))
    signed = sign_boundary(KEYS[1], DOMAIN.chain_id, DOMAIN.contract, slot, forked)  # stage 1 signed the fork
    sigs[1] = StepSignatures((signed, *sigs[1].inputs[1:]), sigs[1].grads)
    above = _as_neighbour(2, 0, sigs, hashes)
    assert contradicted_sends(seat, 1, own, KEYS[1].public_key, (honest[0], above), DOMAIN) == [slot]
    assert contradicted_sends(seat, 1, own, KEYS[1].public_key, (None, above), DOMAIN) == [slot]
    framed = sign_boundary(KEYS[2], DOMAIN.chain_id, DOMAIN.contract, slot, forked)  # stage 2 signs it itself
    sigs[1] = StepSignatures((framed, *sigs[1].inputs[1:]), sigs[1].grads)
    assert contradicted_sends(seat, 1, own, KEYS[1].public_key, (honest[0], _as_neighbour(2, 0, sigs, hashes)),
                              DOMAIN) == []


def test_a_gradient_a_stage_signed_but_did_not_commit_as_sent_is_named_by_the_stage_below():
    seat, own = RECORDS[2].seat, _served(2, 1).hashes  # the last stage sends gradients back alone
    slot = Slot(seat.round, seat.pipeline, 2, 3, 1, Direction.BACKWARD)
    forked = bytes(32)
    hashes, sigs = list(_served(1, 1).hashes), list(_signatures(1, 1))
    hashes[0] = dataclasses.replace(hashes[0], received_grads=(hashes[0].received_grads[0], forked))
    signed = sign_boundary(KEYS[2], DOMAIN.chain_id, DOMAIN.contract, slot, forked)
    sigs[0] = StepSignatures(sigs[0].inputs, (sigs[0].grads[0], signed))
    below = _as_neighbour(1, 1, sigs, hashes)
    assert contradicted_sends(seat, 3, own, KEYS[2].public_key, (below, None), DOMAIN) == [slot]
    assert contradicted_sends(seat, 3, own, KEYS[2].public_key, (_as_neighbour(1, 1), None), DOMAIN) == []
