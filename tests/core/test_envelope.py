"""The submission envelope binds an update to its chain, contract, round and miner."""

from __future__ import annotations

import pytest

from protocol.core.crypto.hashing import Digest
from protocol.core.proof.envelope import (
    MAGIC,
    EnvelopeError,
    check_binding,
    decode_envelope,
    decode_proof,
    encode_envelope,
    encode_proof,
)
from protocol.core.proof.trace import Trace

CONTRACT = "0x" + "ab" * 20
MINER = "0x" + "cd" * 20
TRACE = Trace(tuple(Digest(bytes([i]) * 32) for i in range(4)), (5.5, 5.25, 5.0), Digest(b"\x09" * 32))


def test_round_trip_keeps_trace_and_update_exactly():
    data = encode_envelope(7, CONTRACT, 3, MINER, TRACE, b"update-bytes")
    env = decode_envelope(data, 1 << 20)
    assert env.update == b"update-bytes"
    assert env.trace == TRACE
    check_binding(env, 7, CONTRACT.upper().replace("0X", "0x"), 3, MINER)


@pytest.mark.parametrize("chain_id, contract, round_, miner, needle", [
    (8, CONTRACT, 3, MINER, "another chain"),
    (7, "0x" + "ee" * 20, 3, MINER, "another chain"),
    (7, CONTRACT, 4, MINER, "round 3"),
    (7, CONTRACT, 3, "0x" + "11" * 20, "not the committer"),
])
def test_a_copied_commitment_cannot_be_opened_by_the_copier(chain_id, contract, round_, miner, needle):
    env = decode_envelope(encode_envelope(7, CONTRACT, 3, MINER, TRACE, b"u"), 1 << 20)
    with pytest.raises(EnvelopeError, match=needle):
        check_binding(env, chain_id, contract, round_, miner)


@pytest.mark.parametrize("mutate, needle", [
    (lambda d: b"NOTMAGIC" + d[8:], "bad magic"),
    (lambda d: d[:10], "bad magic"),
    (lambda d: d[:20], "length out of range"),
    (lambda d: d + b"extra", "update size"),
    (lambda d: MAGIC + (10**6).to_bytes(4, "big") + d[12:], "length out of range"),
    (lambda d: d[:12] + b"[" + d[13:], "header invalid"),
])
def test_malformed_bytes_raise_typed_errors(mutate, needle):
    data = encode_envelope(7, CONTRACT, 3, MINER, TRACE, b"u" * 10)
    with pytest.raises(EnvelopeError, match=needle):
        decode_envelope(mutate(data), 1 << 20)


def test_size_cap():
    data = encode_envelope(7, CONTRACT, 3, MINER, TRACE, b"u" * 1000)
    with pytest.raises(EnvelopeError, match="exceeds the cap"):
        decode_envelope(data, 500)


def test_proof_codec_rejects_garbage():
    assert decode_proof(encode_proof(1, 4, [b"\x01" * 32, b"\x02" * 32])) == (1, 4, [b"\x01" * 32, b"\x02" * 32])
    for bad in (b"not json", b'{"index": 5, "size": 4, "siblings": []}', b'{"index": 0, "size": 1, "siblings": ["00"]}'):
        with pytest.raises(EnvelopeError):
            decode_proof(bad)
