"""What a validator's worker process computes: proof checks and usefulness scores. Replays run
on the profile's device, and with a world size above 1 through a process group of that many
ranks (protocol/node/ddp_worker.py); usefulness losses are float32 on the profile's device."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

from protocol.config.run_setup import Setup, TrainingSpec
from protocol.config.run_state import load_dataset
from protocol.core.aggregation.state import GlobalState, decode_state
from protocol.core.crypto.hashing import Digest
from protocol.core.crypto.keccak import checksum_address
from protocol.core.proof.envelope import decode_envelope
from protocol.core.proof.replay import ServedBlob, replay_segment
from protocol.core.proof.trace import zero_carry_hash
from protocol.core.proof.verdict import judge, verify_submission
from protocol.core.settlement.fraud import FraudKind
from protocol.core.train.data import Dataset
from protocol.core.train.training import RoundTask
from protocol.node.ddp_worker import stepper_for
from validator.scoring import RoundEntry, Usefulness, score_round, usefulness_of


@dataclass(frozen=True)
class CheckJob:
    spec: TrainingSpec
    run_seed: bytes
    round: int
    miner: str
    state_blob: bytes
    state_hash: bytes
    envelope: bytes
    trace_root: bytes
    carry_in_hash: bytes | None  # carry hash of the miner's last trace (None: it carries zeros)
    # fetched checkpoints by leaf index (None: not served); a path is read when its check needs it,
    # so the worker holds one checkpoint at a time
    leaves: dict[int, bytes | Path | None]
    segments: tuple[int, ...]
    max_bytes: int
    steps: int = 0  # the miner's committed inner steps (0: the run's H)
    mode: str = "exact"  # "tolerance": replays within δ pass (no validator holds the miner's class)


@dataclass(frozen=True)
class CheckOutcome:
    miner: str
    kind: FraudKind | None  # None: the proof holds
    leaf: int | None
    segment: int | None
    detail: str
    expected_hash: bytes | None
    actual_hash: bytes | None
    inner_hashes: tuple[tuple[bytes, ...], ...] = ()  # per challenged segment replayed: its states' hashes
    tolerated: bool = False  # passed only within δ (tolerance mode): flagged


def check_miner(job: CheckJob) -> CheckOutcome:
    setup = Setup(job.spec, job.run_seed)
    model, cfg = setup.model, setup.compute.with_steps(job.steps)
    ds = load_dataset(job.spec.dataset)
    theta = decode_state(job.state_blob, model, job.state_hash).params
    env = decode_envelope(job.envelope, job.max_bytes)
    task = RoundTask(job.run_seed, job.round, bytes.fromhex(job.miner[2:]), model, cfg)
    carry_in_hash = job.carry_in_hash or bytes(zero_carry_hash(model))
    reload = functools.partial(load_dataset, job.spec.dataset)  # a process group's ranks load their own
    with stepper_for(setup.profile, task, ds, reload, hash_steps=True) as stepper:
        v = verify_submission(task, ds, theta, carry_in_hash, job.trace_root, env.trace, env.update,
                              lambda leaf: _read(job.leaves.get(leaf)), job.segments, setup.profile, job.mode,
                              stepper=stepper)
    j = judge(v)
    expected = actual = None
    for r in v.replays:
        if r.segment == j.segment:
            expected, actual = bytes(r.expected_hash), (bytes(r.actual_hash) if r.actual_hash else None)
    inner = tuple(tuple(bytes(h) for h in r.inner_hashes) for r in v.replays)
    return CheckOutcome(job.miner, j.kind, j.leaf, j.segment, j.detail, expected, actual, inner, j.tolerated)


def _read(leaf: bytes | Path | None) -> bytes | None:
    if isinstance(leaf, Path):
        try:
            return leaf.read_bytes()
        except FileNotFoundError:
            return None  # dropped from the store since the job was made: as if not served
    return leaf


def _served(leaf: bytes | Path | None) -> ServedBlob:
    return functools.partial(_read, leaf) if isinstance(leaf, Path) else leaf  # read when the replay needs it


@dataclass(frozen=True)
class AuditJob:
    """Replay the segments another validator claims to have replayed (validator/audits.py)."""

    spec: TrainingSpec
    run_seed: bytes
    round: int
    miner: str
    envelope: bytes
    segments: tuple[int, ...]
    leaves: dict[int, bytes | Path | None]  # both ends of each segment (None: not served; a path is read when needed)
    max_bytes: int
    steps: int = 0  # the miner's committed inner steps (0: the run's H)


@dataclass(frozen=True)
class AuditReplay:
    served: bool  # every segment's start checkpoint was served and is the committed one
    matches: bool  # every replay reproduces the committed end checkpoint and losses
    inner_hashes: tuple[bytes, ...]  # segment after segment, as the witness covers them


def replay_for_audit(job: AuditJob) -> AuditReplay:
    setup = Setup(job.spec, job.run_seed)
    env = decode_envelope(job.envelope, job.max_bytes)
    task = RoundTask(job.run_seed, job.round, bytes.fromhex(job.miner[2:]), setup.model,
                     setup.compute.with_steps(job.steps))
    ds = load_dataset(job.spec.dataset)
    reload = functools.partial(load_dataset, job.spec.dataset)
    with stepper_for(setup.profile, task, ds, reload, hash_steps=True) as stepper:
        replays = [replay_segment(task, ds, env.trace, s, _served(job.leaves.get(s)), _served(job.leaves.get(s + 1)),
                                  setup.profile, stepper=stepper)
                   for s in job.segments]
    if any(r.actual_hash is None for r in replays):
        return AuditReplay(False, False, ())
    # exact mode: the committed hash decides, whether or not the end checkpoint was served
    matches = all(r.actual_hash == r.expected_hash and r.losses_match for r in replays)
    return AuditReplay(True, matches, tuple(bytes(h) for r in replays for h in r.inner_hashes))


@dataclass(frozen=True)
class ScoreJob:
    spec: TrainingSpec
    run_seed: bytes
    round: int
    state_blob: bytes
    state_hash: bytes
    entries: list[tuple[str, int, bytes | None, bool, int]]  # (miner, commit order, envelope, proof ok, steps)
    validator_seed: bytes
    max_bytes: int


def _score_inputs(job: ScoreJob) -> tuple[list[RoundEntry], Dataset, GlobalState]:
    setup = Setup(job.spec, job.run_seed)
    model, cfg = setup.model, setup.compute
    state = decode_state(job.state_blob, model, job.state_hash)
    entries = []
    for miner, order, envelope, ok, steps in job.entries:
        if envelope is None or not cfg.allows_steps(steps):
            continue  # scores 0: nothing served, or a step count the run does not allow (its check fails)
        task = RoundTask(job.run_seed, job.round, bytes.fromhex(miner[2:]), model, cfg.with_steps(steps))
        entries.append(RoundEntry(task, order, decode_envelope(envelope, job.max_bytes).update, ok))
    return entries, load_dataset(job.spec.dataset), state


def usefulness_by_miner(job: ScoreJob) -> dict[bytes, Usefulness]:
    """The costly half of `scored_miners`, run before the proof verdicts are in."""
    entries, ds, state = _score_inputs(job)
    device = Setup(job.spec, job.run_seed).profile.device
    return usefulness_of(entries, ds, state.params, Digest(job.validator_seed), device=device)


def scored_miners(job: ScoreJob, useful: dict[bytes, Usefulness] | None = None) -> dict[str, tuple[int, str]]:
    """Integer scores in [0, 65535] and why each is what it is (`useful`: `usefulness_by_miner`
    of the same job, if it ran already): "" for a positive score, else the zero
    reason (proof, malformed, over-norm, copy), "no held-out gain", or "nothing scored" (no
    usable envelope, or a step count the run does not allow). Operators read it in the log."""
    entries, ds, state = _score_inputs(job)
    out = {miner.lower(): (0, "nothing scored") for miner, *_ in job.entries}
    device = Setup(job.spec, job.run_seed).profile.device
    scores = score_round(entries, ds, state.params, Digest(job.validator_seed), useful=useful, device=device,
                         step_norm=state.step_norm)
    for raw, s in scores.items():
        why = s.zero_reason.value if s.zero_reason is not None else ("" if s.score > 0 else "no held-out gain")
        out["0x" + raw.hex()] = (s.score, why)
    return {_checksum(m): v for m, v in out.items()}


def _checksum(address: str) -> str:
    return checksum_address(address)
