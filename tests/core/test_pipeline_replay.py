"""A pipeline stage's trace, its exact replay from a trace, and who is at fault for a boundary
tensor (issue 32): three Llama stages, H = 4, k = 2, 2 microbatches."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest
import torch

from protocol.core.crypto.hashing import Digest
from protocol.core.crypto.signing import NodeIdentity
from protocol.core.model.config import preset
from protocol.core.model.gpt import init_params
from protocol.core.pipeline.attribution import (
    Domain,
    Fault,
    InvalidClaim,
    attribute_serving,
    attribute_slot,
)
from protocol.core.pipeline.boundary import Direction, Signed, Slot, sign_boundary
from protocol.core.pipeline.gpipe import Received, fresh_state, tensor_hash
from protocol.core.pipeline.stage_checkpoint import StageCheckpoint, capture, stage_state_hash
from protocol.core.pipeline.stage_module import StageModule, stage_params
from protocol.core.pipeline.stage_record import PipelineRecorder, StageRecord, record_pipeline
from protocol.core.pipeline.stage_replay import (
    Differed,
    ServedDataMismatch,
    ServedSegment,
    StageReplayResult,
    StageReplayStatus,
    StageTask,
    replay_stage_segment,
)
from protocol.core.pipeline.stage_split import split_model
from protocol.core.pipeline.stage_trace import (
    StageTraceError,
    boundary_leaf,
    check_stage_leaf,
    check_stage_trace,
    stage_leaf_proof,
    stage_trace_root,
)
from protocol.core.train.compute_config import ComputeConfig

MODEL = dataclasses.replace(preset("llama-micro"), n_layer=3)  # the smallest Llama of three stages
SPLIT = split_model(MODEL, 3)
CFG = ComputeConfig(inner_steps=4, checkpoint_every=2)  # two segments
M, ROUND, PIPELINE = 2, 7, 1
DOMAIN = Domain(31337, bytes(range(20)))
Batches = list[tuple[torch.Tensor, torch.Tensor]]


def modules() -> list[StageModule]:
    params = init_params(MODEL, 1)
    out = []
    for s in range(SPLIT.count):
        module = StageModule(MODEL, SPLIT, s)
        with torch.no_grad():
            for name, p in module.named_parameters():
                p.copy_(stage_params(params, SPLIT, s)[name])
        out.append(module)
    return out


BATCHES: Batches = []
for _step in range(CFG.inner_steps):
    _gen = torch.Generator().manual_seed(_step)
    BATCHES.append((torch.randint(0, MODEL.vocab_size, (4, MODEL.block_size), generator=_gen),
                    torch.randint(0, MODEL.vocab_size, (4, MODEL.block_size), generator=_gen)))


BeforeStep = Callable[[int, list[StageModule], PipelineRecorder], None]


def recorded(before_step: BeforeStep | None = None) -> list[StageRecord]:
    """A round of the pipeline; `before_step(t, modules, recorder)` may change a stage before step t."""
    mods = modules()
    recorder = PipelineRecorder(mods, [fresh_state(m) for m in mods], CFG, M, ROUND, PIPELINE)
    for t, (x, y) in enumerate(BATCHES, start=1):
        if before_step is not None:
            before_step(t, mods, recorder)
        recorder.step(x, y)
    return recorder.records()


@pytest.fixture(scope="module")
def honest() -> list[StageRecord]:
    mods = modules()
    return record_pipeline(mods, [fresh_state(m) for m in mods], BATCHES, CFG, M, ROUND, PIPELINE)


def served(record: StageRecord, segment: int, received: tuple[Received, ...] | None = None) -> ServedSegment:
    steps = record.segment(segment)
    return ServedSegment(record.starts[segment], tuple(io.hashes for io in steps),
                         received if received is not None else tuple(io.received for io in steps))


def replay(record: StageRecord, segment: int, received: tuple[Received, ...] | None = None) -> StageReplayResult:
    k = CFG.checkpoint_every
    return replay_stage_segment(StageTask(MODEL, SPLIT, CFG, M, record.seat), record.trace, segment,
                                served(record, segment, received), BATCHES[segment * k : (segment + 1) * k])


def statuses(records: list[StageRecord]) -> dict[tuple[int, int], StageReplayStatus]:
    return {(r.seat.stage, j): replay(r, j).status for r in records for j in range(CFG.n_segments)}


def signed(identity: NodeIdentity, slot: Slot, h: bytes) -> Signed:
    return Signed(h, sign_boundary(identity, DOMAIN.chain_id, DOMAIN.contract, slot, h))


def test_every_segment_of_every_honest_stage_replays_exact(honest: list[StageRecord]) -> None:
    assert set(statuses(honest).values()) == {StageReplayStatus.EXACT}


def test_what_a_stage_sent_is_what_its_neighbour_committed_receiving(honest: list[StageRecord]) -> None:
    for t in range(CFG.inner_steps):
        for s in (0, 1):
            assert honest[s].steps[t].hashes.sent_forward == honest[s + 1].steps[t].hashes.received_inputs
            assert honest[s + 1].steps[t].hashes.sent_backward == honest[s].steps[t].hashes.received_grads
    assert honest[0].steps[0].hashes.received_inputs == ()  # tokens are public data, not boundary tensors


def test_the_trace_root_binds_each_leaf_and_its_proof(honest: list[StageRecord]) -> None:
    trace = honest[1].trace
    root = stage_trace_root(trace)
    check_stage_trace(trace, root, CFG)
    leaf = boundary_leaf(1, CFG.n_segments)
    assert leaf == 4  # checkpoints at leaves 0, 1, 2; boundary roots at 3, 4
    check_stage_leaf(root, leaf, CFG, trace.boundary_roots[1], stage_leaf_proof(trace, leaf))
    with pytest.raises(StageTraceError):  # another leaf's value at this index
        check_stage_leaf(root, leaf, CFG, trace.boundary_roots[0], stage_leaf_proof(trace, leaf))
    with pytest.raises(StageTraceError, match="not 2 of 5"):
        check_stage_leaf(root, 2, CFG, trace.checkpoint_hashes[1], stage_leaf_proof(trace, 1))
    with pytest.raises(StageTraceError):
        check_stage_trace(honest[2].trace, root, CFG)  # another stage's trace


def test_the_stage_state_hash_binds_parameters_moments_warm_flag_and_step(honest: list[StageRecord]) -> None:
    ck = honest[1].starts[1]
    base = stage_state_hash(ck, MODEL)
    name = next(iter(ck.params))

    def bumped(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        out = {k: t.clone() for k, t in tensors.items()}
        out[name].view(-1)[0] += 1e-6
        return out

    changed = [dataclasses.replace(ck, params=bumped(ck.params)), dataclasses.replace(ck, exp_avg=bumped(ck.exp_avg)),
               dataclasses.replace(ck, exp_avg_sq=bumped(ck.exp_avg_sq)), dataclasses.replace(ck, warm=True),
               dataclasses.replace(ck, step=ck.step + 1), dataclasses.replace(ck, stage=2)]
    assert len({base, *(stage_state_hash(c, MODEL) for c in changed)}) == len(changed) + 1
    golden = StageCheckpoint(0, 0, {"a": torch.ones(2)}, {"a": torch.zeros(2)}, {"a": torch.zeros(2)}, False)
    assert stage_state_hash(golden, MODEL).hex() == GOLDEN_STATE_HASH


GOLDEN_STATE_HASH = "c8cec5cdefbfeb389092accc08a8c9afd70a366d95eecf2bf4fc10b7650a50f0"  # pins the layout


def test_a_stage_perturbed_before_step_3_is_caught_at_step_3_and_its_neighbours_replay_exact(
        honest: list[StageRecord]) -> None:
    def cheat(t: int, mods: list[StageModule], _: PipelineRecorder) -> None:
        if t == 3:
            with torch.no_grad():
                next(mods[1].parameters()).view(-1)[0] += 1e-6

    records = recorded(cheat)
    assert records[2].steps[2].hashes.received_inputs != honest[2].steps[2].hashes.received_inputs  # fed the cheat
    assert replay(records[1], 0).status is StageReplayStatus.EXACT
    caught = replay(records[1], 1)
    assert caught.status is StageReplayStatus.MISMATCH and caught.divergence is not None
    assert (caught.divergence.what, caught.divergence.step) == (Differed.SENT_TENSOR, 3)
    assert (caught.divergence.microbatch, caught.divergence.direction) == (0, Direction.FORWARD)
    assert all(replay(records[s], j).status is StageReplayStatus.EXACT for s in (0, 2) for j in (0, 1))


def test_a_stage_whose_end_state_is_not_its_committed_leaf_is_caught_at_the_end_checkpoint(
        honest: list[StageRecord]) -> None:
    record = honest[0]
    end = Digest(b"\0" * 32)
    lied = dataclasses.replace(record.trace, checkpoint_hashes=(*record.trace.checkpoint_hashes[:2], end))
    result = replay(dataclasses.replace(record, trace=lied), 1)
    assert result.divergence is not None
    assert (result.status, result.divergence.what, result.divergence.step) == (
        StageReplayStatus.MISMATCH, Differed.END_CHECKPOINT, 4)


def test_served_data_other_than_the_committed_data_raises_not_a_mismatch(honest: list[StageRecord]) -> None:
    record, steps = honest[1], honest[1].segment(1)
    wrong = Received((steps[0].received.inputs[0] + 1e-3, steps[0].received.inputs[1]), steps[0].received.grads)
    with pytest.raises(ServedDataMismatch, match="received input of microbatch 0"):
        replay(record, 1, (wrong, steps[1].received))
    with pytest.raises(ServedDataMismatch, match="leaf 1"):  # the state after 0 steps served for segment 1
        replay(dataclasses.replace(record, starts=(record.starts[0], dataclasses.replace(record.starts[0], step=2))), 1)
    hashes = steps[1].hashes
    claimed = dataclasses.replace(hashes, sent_forward=(hashes.sent_forward[1], hashes.sent_forward[0]))
    moved = (*record.steps[:3], dataclasses.replace(record.steps[3], hashes=claimed))
    with pytest.raises(ServedDataMismatch, match="boundary root"):
        replay(dataclasses.replace(record, steps=moved), 1)


def test_a_tensor_the_stage_withholds_may_come_from_its_sender_and_none_from_either_is_its_fault(
        honest: list[StageRecord]) -> None:
    from_senders = tuple(Received(honest[0].steps[t].sent.forward, honest[2].steps[t].sent.backward) for t in (0, 1))
    as_float64 = tuple(Received(tuple(x.double().flatten() for x in r.inputs), r.grads) for r in from_senders)
    assert replay(honest[1], 0, from_senders).status is StageReplayStatus.EXACT
    assert replay(honest[1], 0, as_float64).status is StageReplayStatus.EXACT  # the committed values, any layout
    slot = Slot(ROUND, PIPELINE, 0, 1, 0, Direction.FORWARD)
    committed = honest[1].steps[0].hashes.received_inputs[0]
    by_sender = tensor_hash(honest[0].steps[0].sent.forward[0])
    assert attribute_serving(slot, committed, [None, by_sender]).consistent
    for served_hashes in ([None, None], [b"\1" * 32, None]):
        withheld = attribute_serving(slot, committed, served_hashes)
        assert withheld.faults == {Fault.WITHHELD} and withheld.at_fault == (1,)


def test_a_receiver_that_lies_about_what_it_received_is_at_fault_not_its_sender(honest: list[StageRecord]) -> None:
    sender, receiver = NodeIdentity.generate(), NodeIdentity.generate()
    slot = Slot(ROUND, PIPELINE, 1, 3, 1, Direction.FORWARD)
    sent = signed(sender, slot, honest[1].steps[2].hashes.sent_forward[1])
    truthful = honest[2].steps[2].hashes.received_inputs[1]
    assert attribute_slot(DOMAIN, sender.public_key, slot, sent, truthful, sent).at_fault == ()
    lie = tensor_hash(honest[1].steps[2].sent.forward[1] + 1e-3)
    forged = (None, signed(receiver, slot, lie),  # its own key, not the sender's
              signed(sender, dataclasses.replace(slot, step=4), lie))  # the sender's, for another slot
    for held in forged:
        verdict = attribute_slot(DOMAIN, sender.public_key, slot, sent, lie, held)
        assert verdict.faults == {Fault.RECEIVER_MISREPORTED} and verdict.at_fault == (2,)
    with pytest.raises(InvalidClaim):  # a sender's claim nobody can check accuses nobody
        attribute_slot(DOMAIN, sender.public_key, slot, signed(receiver, slot, sent.tensor_hash), lie)


def test_an_equivocating_sender_is_at_fault_not_its_receiver(honest: list[StageRecord]) -> None:
    sender = NodeIdentity.generate()
    slot = Slot(ROUND, PIPELINE, 2, 1, 0, Direction.BACKWARD)  # stage 2's gradient to stage 1
    committed_sent = honest[2].steps[0].hashes.sent_backward[0]
    other = tensor_hash(honest[2].steps[0].sent.backward[0] * 2)
    claim, given = signed(sender, slot, committed_sent), signed(sender, slot, other)
    verdict = attribute_slot(DOMAIN, sender.public_key, slot, claim, other, given)
    assert verdict.faults == {Fault.SENDER_EQUIVOCATED} and verdict.at_fault == (2,)
    both = attribute_slot(DOMAIN, sender.public_key, slot, claim, b"\3" * 32, given)  # and the receiver lies too
    assert both.faults == {Fault.SENDER_EQUIVOCATED, Fault.RECEIVER_MISREPORTED} and both.at_fault == (1, 2)


def wrong_activation(recorder: PipelineRecorder, step: int, microbatch: int) -> Callable[..., torch.Tensor | None]:
    """A forward hook that shifts the stage's output for one microbatch of one step."""
    calls: list[int] = []

    def hook(_module: torch.nn.Module, _args: object, out: torch.Tensor) -> torch.Tensor | None:
        if recorder.done != step:
            return None
        calls.append(len(calls))
        return out + 1e-3 if calls[-1] == microbatch else None

    return hook


def test_two_colluding_adjacent_stages_are_caught_by_the_senders_replay_and_stage_0_is_clean() -> None:
    def collude(t: int, mods: list[StageModule], recorder: PipelineRecorder) -> None:
        if t == 1:  # stage 1 sends a wrong activation at step 2; stage 2 commits it and trains on it
            mods[1].register_forward_hook(wrong_activation(recorder, step=2, microbatch=1))

    records, sender = recorded(collude), NodeIdentity.generate()
    slot = Slot(ROUND, PIPELINE, 1, 2, 1, Direction.FORWARD)
    sent, received = records[1].steps[1].hashes.sent_forward[1], records[2].steps[1].hashes.received_inputs[1]
    assert attribute_slot(DOMAIN, sender.public_key, slot, signed(sender, slot, sent), received).consistent
    caught = replay(records[1], 0)
    assert caught.divergence is not None
    assert (caught.status, caught.divergence.step, caught.divergence.microbatch, caught.divergence.direction) == (
        StageReplayStatus.MISMATCH, 2, 1, Direction.FORWARD)
    assert replay(records[0], 0).status is replay(records[0], 1).status is StageReplayStatus.EXACT
    assert replay(records[2], 0).status is StageReplayStatus.EXACT  # it computed exactly on what it took


def test_a_captured_state_does_not_follow_later_steps() -> None:
    mods = modules()
    state = fresh_state(mods[0])
    ck = capture(mods[0], state, 0)
    with torch.no_grad():
        next(mods[0].parameters()).add_(1.0)
    state.exp_avg[next(iter(state.exp_avg))].add_(1.0)
    assert stage_state_hash(ck, MODEL) == stage_state_hash(capture(modules()[0], fresh_state(mods[0]), 0), MODEL)
