"""Stage segment bundles over the blob protocol between real hosts on 127.0.0.1 (PROTOCOL.md §16.5,
docs/INTEROP.md §5): a validator fetches what a stage serves for a challenged segment, or what the
sender of its tensors keeps of it, decodes it and replays it exactly. An unknown segment is
BlobNotFound, a cap below the bundle is FrameTooLarge and the server keeps serving, a silent server
is TransferTimeout, and a bundle the server corrupted is a typed BlobFormatError or
ServedDataMismatch, never a replay mismatch."""

from __future__ import annotations

import functools
import json

import pytest
import torch
import trio

from protocol.core.checkpoint.format import BlobFormatError
from protocol.core.pipeline.attribution import Domain
from protocol.core.pipeline.boundary import Direction, Slot, sign_boundary
from protocol.core.pipeline.received_signatures import StepSignatures, misreported_slots
from protocol.core.pipeline.segment_bundle import (
    ServedBundle,
    decode_segment,
    encode_segment,
    max_segment_bytes,
)
from protocol.core.pipeline.stage_record import StageRecord
from protocol.core.pipeline.stage_replay import (
    ServedDataMismatch,
    ServedSegment,
    StageReplayResult,
    StageReplayStatus,
    StageTask,
    replay_stage_segment,
)
from protocol.core.pipeline.stage_trace import stage_trace_root
from protocol.core.wire.messages import MalformedMessage, StageSegmentRequest
from protocol.p2p import framing
from protocol.p2p.blob_streams import PROTOCOL
from protocol.p2p.errors import BlobNotFound, FrameTooLarge, TransferTimeout
from tests.core.test_segment_bundle import (  # one recorded round
    CFG,
    COUNT,
    DATA,
    MODEL,
    RECORDS,
    ROWS,
    SPLIT,
    K,
)

from .conftest import CHAIN_ID, CONTRACT, cluster, identity

STAGE, SEGMENT = 1, 1  # the middle stage receives activations and gradients: every tensor kind
# node 0 of a cluster is stage 0 (the sender of stage 1's inputs), node 1 stage 1, node 2 the
# validator; stage 2, which sends stage 1 its gradients, is a key only
KEYS = [identity(0), identity(1), identity(3)]
DOMAIN = Domain(CHAIN_ID, CONTRACT)
SENDER, STAGE_NODE, VALIDATOR = 0, 1, 2


@functools.cache
def _round() -> tuple[list[StageRecord], list[tuple[torch.Tensor, torch.Tensor]]]:
    """An honest 3-stage round of 4 steps, recorded in this process: test_segment_bundle's."""
    return RECORDS, DATA


def _signatures(rec: StageRecord) -> tuple[StepSignatures, ...]:
    """What the stage's link kept: its neighbours' signatures of what they sent it in SEGMENT."""
    seat, out = rec.seat, []
    for i, io in enumerate(rec.segment(SEGMENT)):
        step = SEGMENT * K + i + 1

        def signed(sender: int, direction: Direction, hashes, step: int = step) -> tuple[bytes, ...]:
            slot = functools.partial(Slot, seat.round, seat.pipeline, sender, step)
            return tuple(sign_boundary(KEYS[sender], CHAIN_ID, CONTRACT, slot(m, direction), h)
                         for m, h in enumerate(hashes))
        out.append(StepSignatures(signed(STAGE - 1, Direction.FORWARD, io.hashes.received_inputs),
                                  signed(STAGE + 1, Direction.BACKWARD, io.hashes.received_grads)))
    return tuple(out)


@functools.cache
def _bundle() -> bytes:
    """What stage 1 serves for SEGMENT: `encode_segment` of its kept start state, hashes,
    received tensors and signatures."""
    rec = _round()[0][STAGE]
    steps = rec.segment(SEGMENT)
    served = ServedSegment(rec.starts[SEGMENT], tuple(io.hashes for io in steps),
                           tuple(io.received for io in steps))
    return encode_segment(rec.seat, ServedBundle(served, _signatures(rec)), COUNT)


def _key() -> tuple[int, bytes]:
    """(round, stage 1's trace root): what a validator reads from stage 1's commitment."""
    rec = _round()[0][STAGE]
    return rec.seat.round, bytes(stage_trace_root(rec.trace))


def _cap() -> int:
    return max_segment_bytes(MODEL, SPLIT, _round()[0][STAGE].seat, K, COUNT, ROWS)


def _replay(blob: bytes) -> StageReplayResult:
    """The validator's side: decode under the model's form, replay (which first checks the served
    data against the trace), then check the signatures of the hashes now known to be committed."""
    records, data = _round()
    rec = records[STAGE]
    bundle = decode_segment(blob, MODEL, SPLIT, rec.seat, K, COUNT, ROWS, start_step=SEGMENT * K)
    task = StageTask(MODEL, SPLIT, CFG, COUNT, rec.seat)
    result = replay_stage_segment(task, rec.trace, SEGMENT, bundle.segment,
                                  data[SEGMENT * K:(SEGMENT + 1) * K])
    neighbours = (KEYS[STAGE - 1].public_key, KEYS[STAGE + 1].public_key)
    assert misreported_slots(rec.seat, SEGMENT * K + 1, bundle.segment.hashes, bundle.signatures,
                             neighbours, DOMAIN) == []
    return result


def _flipped(blob: bytes, tensor: str) -> bytes:
    """`blob` with one bit of `tensor`'s first byte flipped (a server that serves another value)."""
    n = int.from_bytes(blob[:8], "little")
    start = 8 + n + json.loads(blob[8 : 8 + n])[tensor]["data_offsets"][0]
    return blob[:start] + bytes([blob[start] ^ 1]) + blob[start + 1 :]


def test_the_request_parses_strictly():
    root = "0x" + "ab" * 32
    ok = StageSegmentRequest(round=7, trace_root=root, segment=3)
    assert framing.decode_request(framing.encode_request(ok)[4:]) == ok
    assert json.loads(ok.model_dump_json()) == {"schema_version": 1, "kind": "stage_segment", "round": 7,
                                                "trace_root": root, "segment": 3}
    body: dict[str, object] = {"schema_version": 1, "kind": "stage_segment", "round": 7, "trace_root": root,
                               "segment": 3}
    bad: list[dict[str, object]] = [{"segment": -1}, {"segment": 2**32}, {"trace_root": "0x" + "AB" * 32},
                                    {"trace_root": root[:-2]}, {"round": "7"}, {"round": 2**63}, {"index": 3},
                                    {"schema_version": 2}]
    for change in bad:
        with pytest.raises(MalformedMessage):
            framing.decode_request(json.dumps(body | change).encode())
    with pytest.raises(MalformedMessage):  # a field missing
        framing.decode_request(json.dumps({"kind": "stage_segment", "round": 7, "trace_root": root}).encode())


@pytest.mark.trio
async def test_a_validator_replays_what_the_stage_and_its_sender_serve(tmp_path):
    blob, (round_, root) = _bundle(), _key()
    assert len(blob) <= _cap()
    with trio.fail_after(30):
        async with cluster(tmp_path, 3) as c:
            c.segments[STAGE_NODE].put(round_, root, SEGMENT, blob)
            c.segments[SENDER].put(round_, root, SEGMENT, blob)  # the sender's copy, by the receiver's root
            validator = c.nodes[VALIDATOR]
            from_stage = await validator.fetch_stage_segment(
                c.nodes[STAGE_NODE].identity.public_key, round_, root, SEGMENT, max_bytes=_cap())
            from_sender = await validator.fetch_stage_segment(
                c.nodes[SENDER].identity.public_key, round_, root, SEGMENT, max_bytes=_cap())
    assert from_stage == blob and from_sender == blob
    for fetched in (from_stage, from_sender):
        result = _replay(fetched)
        assert result.status is StageReplayStatus.EXACT and result.divergence is None


@pytest.mark.trio
async def test_an_unknown_segment_round_or_root_is_not_found(tmp_path):
    blob, (round_, root) = _bundle(), _key()
    other_root = bytes(stage_trace_root(_round()[0][STAGE - 1].trace))  # the sender's own root
    with trio.fail_after(30):
        async with cluster(tmp_path, 2) as c:
            c.segments[0].put(round_, root, SEGMENT, blob)
            server = c.nodes[0].identity.public_key
            for r, tr, j in [(round_, root, 0), (round_ + 1, root, SEGMENT), (round_, other_root, SEGMENT),
                             (round_, root, 2**32 - 1)]:
                with pytest.raises(BlobNotFound):
                    await c.nodes[1].fetch_stage_segment(server, r, tr, j, max_bytes=_cap())
            assert c.nodes[0].server.refusals == {"NOT_FOUND": 4}
            c.segments[0].drop_round(round_)  # pruned: no longer served
            with pytest.raises(BlobNotFound):
                await c.nodes[1].fetch_stage_segment(server, round_, root, SEGMENT, max_bytes=_cap())


@pytest.mark.trio
async def test_a_cap_below_the_bundle_is_refused_and_the_server_keeps_serving(tmp_path):
    blob, (round_, root) = _bundle(), _key()
    with trio.fail_after(30):
        async with cluster(tmp_path, 2) as c:
            c.segments[0].put(round_, root, SEGMENT, blob)
            server, client = c.nodes[0].identity.public_key, c.nodes[1]
            with pytest.raises(FrameTooLarge, match="announced blob"):
                await client.fetch_stage_segment(server, round_, root, SEGMENT, max_bytes=len(blob) - 1)
            # a cap of exactly its size takes it: the server announces what it holds, no more
            assert await client.fetch_stage_segment(server, round_, root, SEGMENT, max_bytes=len(blob)) == blob
            assert c.nodes[0].server.active == 0


@pytest.mark.trio
async def test_a_server_that_reads_the_request_and_goes_silent_is_a_timeout(tmp_path):
    _, (round_, root) = _bundle(), _key()
    with trio.fail_after(30):
        async with cluster(tmp_path, 2, read_timeout_s=0.5) as c:
            asked = []

            async def frozen(stream) -> None:
                asked.append(await framing.read_request(stream, 2.0))
                await trio.sleep_forever()  # never answers; the client's reset ends the stream

            c.nodes[0].host.set_stream_handler(PROTOCOL, frozen)
            with pytest.raises(TransferTimeout):
                await c.nodes[1].fetch_stage_segment(c.nodes[0].identity.public_key, round_, root, SEGMENT,
                                                     max_bytes=_cap())
            assert asked == [StageSegmentRequest(round=round_, trace_root="0x" + root.hex(), segment=SEGMENT)]


@pytest.mark.trio
async def test_a_bundle_the_server_corrupted_is_a_typed_error_not_fraud(tmp_path):
    blob, (round_, root) = _bundle(), _key()
    first_param = next(iter(SPLIT.shapes(MODEL, STAGE)))
    corrupted = {  # what the server serves: (bytes, the typed error, what it says)
        "a received activation": (_flipped(blob, "in/0/1"), ServedDataMismatch, "received input of microbatch 1"),
        "a received gradient": (_flipped(blob, "grad/1/0"), ServedDataMismatch, "output gradient of microbatch 0"),
        "the start state": (_flipped(blob, f"start/m/{first_param}"), ServedDataMismatch, "hash to leaf 1"),
        "a committed hash": (_flipped(blob, "hashes"), ServedDataMismatch, "boundary root"),
        "truncated": (blob[: len(blob) // 2], BlobFormatError, "safetensors"),
        "not safetensors": (b"\xff" * 64, BlobFormatError, "out of bounds"),
    }
    fetched = {}
    with trio.fail_after(60):
        async with cluster(tmp_path, 2) as c:
            server = c.nodes[0].identity.public_key
            for name, (bad, _, _) in corrupted.items():
                c.segments[0].put(round_, root, SEGMENT, bad)  # replaces what it served before
                fetched[name] = await c.nodes[1].fetch_stage_segment(server, round_, root, SEGMENT,
                                                                     max_bytes=_cap())
    for name, (bad, error, says) in corrupted.items():
        assert fetched[name] == bad, name  # the transport delivered exactly what was served
        with pytest.raises(error, match=says):  # before any verdict: no StageReplayResult at all
            _replay(bad)
