"""The stage miner's committed blob (PROTOCOL.md §16.4): bound to chain, contract, round, miner and
seat; strict on every field; its trace hashes to the committed trace root."""

from __future__ import annotations

import pytest

from protocol.core.crypto.hashing import Digest
from protocol.core.pipeline.stage_envelope import (
    MAGIC,
    check_stage_binding,
    decode_stage_envelope,
    encode_stage_envelope,
)
from protocol.core.pipeline.stage_slots import StageSeat
from protocol.core.pipeline.stage_trace import StageTrace, stage_trace_root
from protocol.core.proof.envelope import EnvelopeError, decode_envelope

CONTRACT, MINER = "0x" + "ab" * 20, "0x" + "cd" * 20
SEAT = StageSeat(3, 1, 2, 3)
TRACE = StageTrace(tuple(Digest(bytes([i]) * 32) for i in range(3)), tuple(Digest(bytes([9 + i]) * 32) for i in range(2)))
CAP = 1 << 20


def blob(update: bytes = b"update-bytes") -> bytes:
    return encode_stage_envelope(7, CONTRACT, MINER, SEAT, TRACE, update)


def test_an_envelope_round_trips_its_seat_trace_and_update_and_binds_to_its_committer():
    env = decode_stage_envelope(blob(), CAP)
    assert env.seat == SEAT and env.trace == TRACE and env.update == b"update-bytes"
    assert stage_trace_root(env.trace) == stage_trace_root(TRACE)
    check_stage_binding(env, 7, CONTRACT.upper().replace("0X", "0x"), 3, MINER)
    for chain_id, contract, round_, miner in ((8, CONTRACT, 3, MINER), (7, MINER, 3, MINER),
                                              (7, CONTRACT, 4, MINER), (7, CONTRACT, 3, CONTRACT)):
        with pytest.raises(EnvelopeError):
            check_stage_binding(env, chain_id, contract, round_, miner)


def test_malformed_stage_envelopes_are_refused_with_a_typed_error():
    good = blob()
    bad = [good[:4], b"VTSUBv1\x00" + good[8:], good + b"x", good[:-1],
           encode_stage_envelope(7, CONTRACT, MINER, StageSeat(3, 1, 3, 3), TRACE, b"u")]
    for data in bad:
        with pytest.raises(EnvelopeError):
            decode_stage_envelope(data, CAP)
    with pytest.raises(EnvelopeError, match="exceeds the cap"):
        decode_stage_envelope(good, len(good) - 1)
    header = good[len(MAGIC) + 4:].split(b"update-bytes")[0].replace(b'"stage":2', b'"stage":2,"extra":1')
    forged = MAGIC + len(header).to_bytes(4, "big") + header + b"update-bytes"
    with pytest.raises(EnvelopeError, match="header invalid"):
        decode_stage_envelope(forged, CAP)


def test_a_stage_envelope_is_never_read_as_a_whole_model_submission():
    with pytest.raises(EnvelopeError, match="bad magic"):
        decode_envelope(blob(), CAP)
