"""Proof of replay: the witness a validator reveals with each score, and the audit sample.

docs/PROTOCOL.md §15. A miner commits only every k-th state of its run; the states after the
other inner steps are known only to whoever ran those steps. A validator that replayed its
challenged segment therefore reveals, next to the score and σ, a *replay witness*: a hash bound
to (validator, σ, round, miner, segment) of the checkpoint hashes of the full state after every
inner step of the segment (`ReplayResult.inner_hashes`, the last being the committed end leaf).
In the audit phase each validator replays a seeded sample of the others' witnessed claims
(`audit_picks`) and recomputes the witness; one that differs, is missing for a non-zero score, or
cannot be replayed because its checkpoints are not served, supports a `lazy_validator` report.

With q = segments_per_validator > 1 a witness covers *all* challenged segments, in the ascending
order `choose_segments` gives, and the concatenation of their inner hashes: a validator cannot
skip q - 1 of its replays, and an audit replays the same q segments (`audit_segments`). The
default q = 1 makes it one segment of k steps.

Witnesses are recomputed bit for bit, so an audit is conclusive between nodes that run the
run's replay profile (exact mode, the default).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from protocol.core.crypto.hashing import DIGEST_SIZE, Digest, blake3_hash, u64
from protocol.core.crypto.signing import NodeIdentity, verify
from protocol.core.errors import ConfigError, VeritrainError
from protocol.core.proof.challenge import challenge_from_signature
from protocol.core.proof.replay import ReplayResult, ReplayStatus
from protocol.core.train.compute_config import ComputeConfig
from protocol.core.train.data import sample_distinct

WITNESS_DOMAIN = "replay-witness"  # blake3_hash domain of a witness
AUDIT_DOMAIN = b"veritrain/audit/v1"  # prefix of the message an auditor signs for its seed
NO_WITNESS = b"\0" * 32  # revealed for a miner no check passed for (its score should be 0)
_ACCEPTED = (ReplayStatus.MATCH, ReplayStatus.TOLERATED)


class WitnessError(VeritrainError):
    """Raised when a witness's inputs are malformed: an address that is not 20 bytes, a σ that
    is not 64, no segment, or inner hashes that are not 32-byte digests, k per segment."""


def replay_witness(validator: bytes, challenge_sig: bytes, round_: int, miner: bytes,
                   segment: int | Sequence[int], inner_hashes: Sequence[bytes]) -> Digest:
    """The 32-byte witness of `validator`'s replay of `miner`'s challenged segment(s) in
    `round_` under challenge signature σ = `challenge_sig`.

    `segment` is the challenged segment (q = 1) or all of them, ascending (q > 1);
    `inner_hashes` is the state hash after each replayed step, segment after segment. Every
    field is length-framed (hashing.blake3_hash) and the segment list is counted, so no two
    inputs share a witness.
    """
    segments = (segment,) if isinstance(segment, int) else tuple(segment)
    if len(validator) != 20 or len(miner) != 20:
        raise WitnessError("validator and miner must be 20-byte addresses")
    if len(challenge_sig) != 64:
        raise WitnessError(f"challenge signature must be 64 bytes, got {len(challenge_sig)}")
    if not segments or any(s < 0 for s in segments) or round_ < 0:
        raise WitnessError("a witness needs a round and at least one segment, all >= 0")
    if not inner_hashes or len(inner_hashes) % len(segments) \
            or any(len(h) != DIGEST_SIZE for h in inner_hashes):
        raise WitnessError("inner hashes must be 32-byte digests, the same number per segment")
    return blake3_hash(WITNESS_DOMAIN, validator, challenge_sig, u64(round_), miner,
                       u64(len(segments)), *(u64(s) for s in segments), *inner_hashes)


def witness_for(validator: bytes, challenge_sig: bytes, round_: int, miner: bytes,
                replays: Sequence[ReplayResult]) -> bytes:
    """What a validator reveals for its replays of one miner's challenged segments: their
    witness if every replay was accepted (MATCH, or TOLERATED in tolerance mode), else
    NO_WITNESS. Whether the miner passed its other checks is the caller's business (a score
    of 0 goes with NO_WITNESS)."""
    if not replays or any(r.status not in _ACCEPTED or not r.inner_hashes for r in replays):
        return NO_WITNESS
    ordered = sorted(replays, key=lambda r: r.segment)
    return replay_witness(validator, challenge_sig, round_, miner, [r.segment for r in ordered],
                          [h for r in ordered for h in r.inner_hashes])


# ---------------------------------------------------------------------------------------
# audits: which segments a revealed σ picked, and which claims an auditor replays


def audit_segments(challenge_sig: bytes, cfg: ComputeConfig) -> tuple[int, ...]:
    """The segments a revealed σ challenged (`make_challenge`'s rule), which its witness covers
    and an audit replays. The caller checks σ itself against the audited validator's node key
    (`proof.verify_challenge`, or `signing.verify` over `proof.challenge_message`)."""
    return challenge_from_signature(challenge_sig, cfg).segments


def audit_segment(challenge_sig: bytes, cfg: ComputeConfig) -> int:
    """The one segment σ challenged at q = 1; raises ConfigError for q > 1, where the witness
    covers every challenged segment (use `audit_segments`)."""
    if cfg.segments_per_validator != 1:
        raise ConfigError("q > 1: a witness covers every challenged segment; use audit_segments")
    return audit_segments(challenge_sig, cfg)[0]


def audit_message(round_: int, seed_block: bytes) -> bytes:
    return AUDIT_DOMAIN + u64(round_) + seed_block


def make_audit_seed(identity: NodeIdentity, round_: int, seed_block: bytes) -> bytes:
    """The auditor's 64-byte σ_a = ed25519(auditor, AUDIT_DOMAIN ‖ r ‖ B), B the round's seed
    block hash. Deterministic, so the auditor cannot shop for a sample, and unknown to every
    audited validator when it reveals (it lacks the auditor's key), so no claim is safe."""
    return identity.sign(audit_message(round_, seed_block))


def verify_audit_seed(public_key: bytes, round_: int, seed_block: bytes, sig: bytes) -> None:
    """Raise SignatureError unless `sig` is the auditor's σ_a for this round and block."""
    verify(public_key, audit_message(round_, seed_block), sig)


def _addr(a: str) -> str:
    return a.lower()


def audit_picks(auditor_sig_seed: bytes, reveals: Mapping[str, Sequence[str]], auditor: str,
                sample: int) -> list[tuple[str, str]]:
    """The (validator, miner) claims an auditor replays: for every validator but the auditor
    (addresses compared case-insensitively), `sample` distinct miners of those it claims to
    have checked, or all of them if fewer. Seeded by blake3 of σ_a (`make_audit_seed`) and the
    validator's lowercase address, so the result depends neither on the order of `reveals` nor
    on the spelling of the addresses; validators come in lowercase order, miners in the order
    the sample drew them.
    """
    if sample <= 0:
        raise ConfigError(f"audit sample must be positive, got {sample}")
    seed = blake3_hash("audit-seed", auditor_sig_seed)
    picks: list[tuple[str, str]] = []
    for validator in sorted(reveals, key=_addr):
        if _addr(validator) == _addr(auditor):
            continue
        miners = sorted({_addr(m): m for m in reveals[validator]}.items())  # (lowercase, given)
        label = blake3_hash("audit-pick", seed, _addr(validator).encode())
        chosen = sample_distinct(label, range(len(miners)), sample)
        picks += [(validator, miners[i][1]) for i in chosen]
    return picks
