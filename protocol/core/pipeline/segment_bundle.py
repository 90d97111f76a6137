"""A stage's challenged segment as one served blob (docs/PROTOCOL.md §16.5): its start state, the
hashes it committed for each step of the segment, and the tensors it received in them.

safetensors, one metadata entry `veritrain-stage-segment` = `stage s/S step t warm w` (t: the
steps taken before the segment; w: 0 or 1), tensors:

    start/p/<name>, start/m/<name>, start/v/<name>   the stage's parameters and AdamW moments
    in/<i>/<m>     the activation received in the segment's step i (0-based), microbatch m
                   (every stage but the first, which reads its tokens)
    grad/<i>/<m>   the output gradient received (every stage but the last, which reads targets)
    hashes         uint8 (k, 4, M, 32): per step, the committed hashes of the received inputs,
                   received gradients, sent activations and sent gradients; zero where the stage
                   has no such neighbour
    signatures     uint8 (k, 2, M, 64): per step, the senders' signatures of the received inputs
                   and received gradients (`received_signatures.py`); zero where none

`decode_segment` checks only the form (keys, shapes, dtypes, a size cap from the model config);
whether the content is what the stage committed is `stage_replay.replay_stage_segment`'s check.
"""

from __future__ import annotations

from dataclasses import dataclass

import safetensors.torch
import torch
from torch import Tensor

from protocol.core.checkpoint.format import MAX_HEADER_BYTES, BlobFormatError, read_safetensors
from protocol.core.crypto.hashing import Digest
from protocol.core.model.config import ModelConfig
from protocol.core.pipeline.gpipe import Received
from protocol.core.pipeline.received_signatures import SIGNATURE_BYTES, StepSignatures
from protocol.core.pipeline.stage_checkpoint import StageCheckpoint
from protocol.core.pipeline.stage_replay import ServedSegment
from protocol.core.pipeline.stage_slots import StageSeat, StepHashes
from protocol.core.pipeline.stage_split import StageSplit

META_KEY = "veritrain-stage-segment"
GROUPS = (("p", "params"), ("m", "exp_avg"), ("v", "exp_avg_sq"))


def _meta(seat: StageSeat, start: StageCheckpoint) -> str:
    return f"stage {seat.stage}/{seat.stages} step {start.step} warm {int(start.warm)}"


def _hash_rows(h: StepHashes, count: int) -> Tensor:
    rows = torch.zeros(4, count, 32, dtype=torch.uint8)
    for i, group in enumerate((h.received_inputs, h.received_grads, h.sent_forward, h.sent_backward)):
        for m, digest in enumerate(group):
            rows[i, m] = torch.frombuffer(bytearray(digest), dtype=torch.uint8)
    return rows


@dataclass(frozen=True)
class ServedBundle:
    segment: ServedSegment
    signatures: tuple[StepSignatures, ...]  # per step of the segment


def _signature_rows(sig: StepSignatures, count: int) -> Tensor:
    rows = torch.zeros(2, count, SIGNATURE_BYTES, dtype=torch.uint8)
    for i, group in enumerate((sig.inputs, sig.grads)):
        for m, signature in enumerate(group):
            rows[i, m] = torch.frombuffer(bytearray(signature), dtype=torch.uint8)
    return rows


def encode_segment(seat: StageSeat, bundle: ServedBundle, count: int) -> bytes:
    """The served segment's bytes (deterministic: one metadata entry, tensors in a fixed order)."""
    served = bundle.segment
    tensors: dict[str, Tensor] = {}
    for prefix, field in GROUPS:
        tensors |= {f"start/{prefix}/{k}": v.contiguous() for k, v in getattr(served.start, field).items()}
    for i, got in enumerate(served.received):
        if seat.stage > 0:
            tensors |= {f"in/{i}/{m}": x.detach().to(torch.float32).contiguous() for m, x in enumerate(got.inputs)}
        tensors |= {f"grad/{i}/{m}": g.detach().to(torch.float32).contiguous() for m, g in enumerate(got.grads)}
    tensors["hashes"] = torch.stack([_hash_rows(h, count) for h in served.hashes])
    tensors["signatures"] = torch.stack([_signature_rows(sig, count) for sig in bundle.signatures])
    return safetensors.torch.save(tensors, metadata={META_KEY: _meta(seat, served.start)})


def max_segment_bytes(model: ModelConfig, split: StageSplit, seat: StageSeat, steps: int, count: int,
                      rows: int) -> int:
    """The cap a fetcher reads up to: three copies of the stage's values, two boundary tensors per
    step and microbatch, the hashes, and the header."""
    values = 3 * split.sizes(model)[seat.stage]
    boundary = 2 * steps * count * rows * model.block_size * model.n_embd
    return 4 * (values + boundary) + steps * count * (4 * 32 + 2 * SIGNATURE_BYTES) + MAX_HEADER_BYTES + 8


def decode_segment(blob: bytes, model: ModelConfig, split: StageSplit, seat: StageSeat, steps: int, count: int,
                   rows: int, start_step: int) -> ServedBundle:
    """Parse a served segment of `steps` steps starting after `start_step`, microbatches of
    `rows` rows; BlobFormatError on any other form."""
    tensors, meta = read_safetensors(blob, max_segment_bytes(model, split, seat, steps, count, rows))
    warm = _check_meta(meta, seat, start_step)
    shapes = split.shapes(model, seat.stage)
    boundary = (rows, model.block_size, model.n_embd)
    expected = {f"start/{p}/{k}": s for p, _ in GROUPS for k, s in shapes.items()}
    ins = [f"in/{i}/{m}" for i in range(steps) for m in range(count)] if seat.stage > 0 else []
    grads = [f"grad/{i}/{m}" for i in range(steps) for m in range(count)] if seat.stage < seat.stages - 1 else []
    expected |= {k: boundary for k in ins + grads} | {"hashes": (steps, 4, count, 32),
                                                        "signatures": (steps, 2, count, SIGNATURE_BYTES)}
    if set(tensors) != set(expected):
        raise BlobFormatError("a served segment holds other tensors than its stage's")
    for key, shape in expected.items():
        dtype = torch.uint8 if key in ("hashes", "signatures") else torch.float32
        if tuple(tensors[key].shape) != shape or tensors[key].dtype != dtype:
            raise BlobFormatError(f"served segment tensor {key} is not {dtype}{shape}")
    params, exp_avg, exp_avg_sq = ({k: tensors[f"start/{p}/{k}"] for k in shapes} for p, _ in GROUPS)
    start = StageCheckpoint(seat.stage, start_step, params, exp_avg, exp_avg_sq, warm)
    segment = ServedSegment(start, tuple(_hashes(tensors["hashes"][i], seat) for i in range(steps)),
                            tuple(_received(tensors, i, count, seat) for i in range(steps)))
    return ServedBundle(segment, tuple(_signatures(tensors["signatures"][i], seat) for i in range(steps)))


def _check_meta(meta: dict[str, str], seat: StageSeat, start_step: int) -> bool:
    for warm in (False, True):
        if meta == {META_KEY: f"stage {seat.stage}/{seat.stages} step {start_step} warm {int(warm)}"}:
            return warm
    raise BlobFormatError("a served segment for another stage or segment")


def _hashes(rows: Tensor, seat: StageSeat) -> StepHashes:
    first, last = seat.stage == 0, seat.stage == seat.stages - 1

    def group(i: int, present: bool) -> tuple[Digest, ...]:
        return tuple(Digest(bytes(rows[i, m].tolist())) for m in range(rows.shape[1])) if present else ()
    return StepHashes(group(0, not first), group(1, not last), group(2, not last), group(3, not first))


def _signatures(rows: Tensor, seat: StageSeat) -> StepSignatures:
    def group(i: int, present: bool) -> tuple[bytes, ...]:
        return tuple(bytes(rows[i, m].tolist()) for m in range(rows.shape[1])) if present else ()
    return StepSignatures(group(0, seat.stage > 0), group(1, seat.stage < seat.stages - 1))


def _received(tensors: dict[str, Tensor], i: int, count: int, seat: StageSeat) -> Received:
    inputs = tuple(tensors[f"in/{i}/{m}"] for m in range(count)) if seat.stage > 0 else ()
    grads = tuple(tensors[f"grad/{i}/{m}"] for m in range(count)) if seat.stage < seat.stages - 1 else ()
    return Received(inputs, grads)
