"""Equivocation evidence (PROTOCOL.md §16.6): two claims by one sender of different hashes for
one slot, as one fixed-width blob whose content hash a report records; a voter confirms it only
for the accused, the reported round and two valid signatures, never for an honest sender."""

from __future__ import annotations

import pytest

from protocol.core.crypto.signing import NodeIdentity
from protocol.core.pipeline.attribution import Domain
from protocol.core.pipeline.boundary import Direction, Signed, Slot, sign_boundary
from protocol.core.pipeline.equivocation import (
    EVIDENCE_BYTES,
    EvidenceMalformed,
    decode_evidence,
    encode_evidence,
    evidence_hash,
    judge_evidence,
)

DOMAIN = Domain(31337, bytes(range(20)))
SENDER, OTHER = NodeIdentity.generate(), NodeIdentity.generate()
SLOT = Slot(4, 1, 2, 7, 1, Direction.BACKWARD)


def claim(identity: NodeIdentity, h: bytes, slot: Slot = SLOT) -> Signed:
    return Signed(h, sign_boundary(identity, DOMAIN.chain_id, DOMAIN.contract, slot, h))


A, B = claim(SENDER, b"\x01" * 32), claim(SENDER, b"\x02" * 32)


def test_one_pair_is_one_blob_whoever_files_it_and_it_decodes_back():
    blob = encode_evidence(SLOT, A, B)
    assert blob == encode_evidence(SLOT, B, A) and len(blob) == EVIDENCE_BYTES
    assert decode_evidence(blob) == (SLOT, A, B)
    assert judge_evidence(blob, evidence_hash(blob), SENDER.public_key, DOMAIN, 4) == (
        True, f"two signed tensors for {SLOT}")


def test_an_honest_sender_and_a_wrong_report_are_never_confirmed():
    blob = encode_evidence(SLOT, A, B)
    recorded = evidence_hash(blob)
    assert not judge_evidence(blob, recorded, OTHER.public_key, DOMAIN, 4)[0]  # not the accused's claims
    assert not judge_evidence(blob, recorded, SENDER.public_key, DOMAIN, 5)[0]  # another round
    assert not judge_evidence(blob, bytes(32), SENDER.public_key, DOMAIN, 4)[0]  # not the reported blob
    framed = encode_evidence(SLOT, A, claim(OTHER, b"\x02" * 32))  # one claim forged by someone else
    assert not judge_evidence(framed, evidence_hash(framed), SENDER.public_key, DOMAIN, 4)[0]
    elsewhere = encode_evidence(SLOT, A, claim(SENDER, b"\x02" * 32, Slot(4, 1, 2, 8, 1, Direction.BACKWARD)))
    assert not judge_evidence(elsewhere, evidence_hash(elsewhere), SENDER.public_key, DOMAIN, 4)[0]  # two slots


def test_malformed_blobs_are_refused_typed():
    blob = encode_evidence(SLOT, A, B)
    with pytest.raises(EvidenceMalformed, match="353 bytes"):
        decode_evidence(blob[:-1])
    with pytest.raises(EvidenceMalformed, match="no valid slot"):
        decode_evidence(blob[:160] + b"\x07" + blob[161:])
    swapped = blob[:161] + blob[161 + 96:] + blob[161:161 + 96]
    with pytest.raises(EvidenceMalformed, match="in order"):
        decode_evidence(swapped)
    same = encode_evidence(SLOT, A, A)
    with pytest.raises(EvidenceMalformed, match="in order"):
        decode_evidence(same)
    assert not judge_evidence(same, evidence_hash(same), SENDER.public_key, DOMAIN, 4)[0]
