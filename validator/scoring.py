"""Usefulness scoring and copy detection: pure rules behind Strategy-style interfaces.

A score is zeroed only for a failed proof, NaN/Inf, an over-norm update or a copy (docs/PROTOCOL.md
§10). Otherwise it measures usefulness, which is never evidence of fraud. Every comparison is per
inner step and every reference public, so a score depends on the miner's own update, θ_r, its
state's norm reference and the validator's seed, never on which other miners a validator scored:

- `GauntletUsefulness` (after Templar's Gauntlet validator, SN3): the loss change from
  applying the update to θ_r, on the miner's assigned data and on held-out data chosen by
  the validator's seed, each averaged over >= 8 batches. The score rewards held-out gain;
  helping its own data less than held-out data costs a soft factor beyond a margin, never
  a zero, so batch noise cannot zero an honest miner.
- `OverlapCosineCopies`: a later commit whose top-k index overlap (Jaccard) and cosine
  similarity with an earlier commit both exceed thresholds is a copy; the earlier one wins.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import torch
from torch import Tensor

from protocol.core.aggregation.exact_v1 import row_norms
from protocol.core.crypto.hashing import Digest, blake3_hash
from protocol.core.model.gpt import (
    LanguageModel,
    ModelConfig,
    Params,
    build_model,
    flatten,
    load_params,
    num_params,
    unflatten,
)
from protocol.core.settlement.class_checks import CheckMode
from protocol.core.settlement.score_vector import SCORE_MAX
from protocol.core.train.compress import (
    UpdateFormatError,
    decode_update,
    decompress_sparse,
    expected_header,
)
from protocol.core.train.compute_config import ComputeConfig
from protocol.core.train.data import Dataset, batch, heldout_batches
from protocol.core.train.training import RoundTask, task_pages

MAX_SCORE = SCORE_MAX  # on-chain scores are integers in [0, 65535] meaning [0, 1]: the core's encoding
Batches = list[tuple[Tensor, Tensor]]  # [(x, y)], each (B, T) int64


class ZeroReason(enum.StrEnum):
    PROOF = "proof"  # replay/derivation/unavailable evidence (see protocol.core.proof.verdict)
    MALFORMED = "malformed"  # blob does not decode: NaN/Inf, bad shapes, over the size cap
    OVER_NORM = "over-norm"  # norm per step above max_norm_ratio x the state's reference
    COPY = "copy"  # a later copy of an earlier commit


@dataclass(frozen=True)
class DecodedUpdate:
    miner: bytes
    commit_order: int  # position of the commit on chain (block, tx index): lower is earlier
    dense: Tensor  # (N,) dequantized pseudo-gradient
    mask: Tensor  # (N,) bool, coordinates the update selected


def decode_for_scoring(miner: bytes, order: int, blob: bytes, model: ModelConfig,
                       cfg: ComputeConfig) -> DecodedUpdate | None:
    """None when the blob is malformed or non-finite (the NaN/Inf guard)."""
    want = expected_header(num_params(model), cfg.chunk, cfg.topk, cfg.bits)
    try:
        dense, mask = decompress_sparse(decode_update(blob, want))
    except UpdateFormatError:
        return None
    if not bool(torch.isfinite(dense).all()):
        return None
    return DecodedUpdate(miner, order, dense, mask)


def over_norm(updates: Sequence[DecodedUpdate], steps: Mapping[bytes, int], step_norm: float | None,
              ratio: float) -> set[bytes]:
    """Miners whose update norm per committed inner step exceeds ratio x `step_norm`, the
    reference θ_r's state carries (the lower median norm per step of the updates that formed
    it; None at genesis: nothing is over). Norms grow about linearly with the steps trained, so
    a full-length update and a minimum-step one compare alike, whoever else committed."""
    if step_norm is None:
        return set()
    return {u.miner for u in updates if exact_norm(u.dense) / steps[u.miner] > ratio * step_norm}


def exact_norm(dense: Tensor) -> float:
    """The L2 norm in float64 (`row_norms`): the same value on every validator."""
    return float(row_norms(dense.double().unsqueeze(0))[0])


# ---------------------------------------------------------------------------------------
# copy detection


@dataclass(frozen=True)
class CopyEvidence:
    copier: bytes
    original: bytes  # the earlier commit
    overlap: float  # Jaccard of selected index sets
    cosine: float


class CopyDetector(Protocol):
    def find_copies(self, updates: Sequence[DecodedUpdate]) -> list[CopyEvidence]: ...


@dataclass(frozen=True)
class OverlapCosineCopies:
    overlap: float = 0.9  # Jaccard threshold (honest micro runs measured well below)
    cosine: float = 0.97  # cosine threshold

    def find_copies(self, updates: Sequence[DecodedUpdate]) -> list[CopyEvidence]:
        ordered = sorted(updates, key=lambda u: u.commit_order)
        found: list[CopyEvidence] = []
        for i, later in enumerate(ordered):
            for earlier in ordered[:i]:
                inter = float((later.mask & earlier.mask).sum())
                union = float((later.mask | earlier.mask).sum())
                jac = inter / max(union, 1.0)
                cos = float(torch.nn.functional.cosine_similarity(later.dense, earlier.dense, dim=0))
                if jac >= self.overlap and cos >= self.cosine:
                    found.append(CopyEvidence(later.miner, earlier.miner, jac, cos))
                    break
        return found


# ---------------------------------------------------------------------------------------
# usefulness


@dataclass(frozen=True)
class Usefulness:
    own_before: float
    own_after: float
    heldout_before: float
    heldout_after: float
    factor: float  # 1.0, or the soft factor when own gain trails held-out gain past the margin
    value: float  # max(0, held-out gain) x factor

    @property
    def heldout_gain(self) -> float:
        return self.heldout_before - self.heldout_after

    @property
    def own_gain(self) -> float:
        return self.own_before - self.own_after

    @property
    def relative(self) -> float:
        """The value on an absolute scale: a share of the held-out loss before the update."""
        return self.value / self.heldout_before if self.heldout_before > 0 else 0.0


class UsefulnessStrategy(Protocol):
    def evaluate(self, model: LanguageModel, theta_r: Params, delta: Tensor, own: Batches,
                 heldout: Batches, heldout_before: float) -> Usefulness: ...


def mean_loss(model: LanguageModel, params: Params, batches: Batches) -> float:
    """Mean loss over equal-size batches, as one float32 forward pass over all of them, on the
    model's device (the batches move there)."""
    load_params(model, params)
    device = next(model.parameters()).device
    x = torch.cat([b[0] for b in batches]).to(device)  # (n*B, T)
    y = torch.cat([b[1] for b in batches]).to(device)  # (n*B, T)
    with torch.no_grad():
        return float(model(x, y))


@dataclass(frozen=True)
class GauntletUsefulness:
    outer_lr: float = 1.0  # the update is applied as θ_r − outer_lr·Δ
    margin: float = 0.02  # own gain may trail held-out gain by this much, unpenalised
    soft_factor: float = 0.5  # multiplier beyond the margin (never zero)

    def evaluate(self, model: LanguageModel, theta_r: Params, delta: Tensor, own: Batches,
                 heldout: Batches, heldout_before: float) -> Usefulness:
        shapes = {k: tuple(v.shape) for k, v in theta_r.items()}
        after = unflatten(flatten(theta_r) - self.outer_lr * delta, shapes)
        own_before = mean_loss(model, theta_r, own)
        own_after = mean_loss(model, after, own)
        held_after = mean_loss(model, after, heldout)
        own_gain, held_gain = own_before - own_after, heldout_before - held_after
        factor = 1.0 if own_gain + self.margin >= held_gain else self.soft_factor
        return Usefulness(own_before, own_after, heldout_before, held_after, factor,
                          max(0.0, held_gain) * factor)


def score_seed(seed_block: bytes) -> Digest:
    """The seed of the round's scoring batches: chain randomness drawn after the commit phase
    closed (the round's seed block), the same for every validator. So the validators of a class
    compute bit-identical scores of an honest update: consensus is exact, and an honest update is
    not zeroed because the few validators present happened to draw unlucky batches (support is
    counted against the permitted stake: with one validator of three absent, consensus is the
    lower of two scores). Public, so anyone recomputes a revealed score from chain data; no
    miner knows it before committing, and no validator can grind it."""
    return blake3_hash("score-seed", seed_block)


def own_batches(ds: Dataset, task: RoundTask, validator_seed: bytes, n: int) -> Batches:
    """n batches from the miner's assigned pages, chosen by the validator's seed."""
    pages = task_pages(task, ds)
    seed = blake3_hash("own-batches", validator_seed, task.miner)
    bs, block = task.cfg.batch_size, task.model.block_size
    return [batch(ds, seed, i, pages, bs, block) for i in range(n)]


def shared_heldout(ds: Dataset, model: ModelConfig, cfg: ComputeConfig,
                   validator_seed: Digest) -> Batches:
    return heldout_batches(ds, validator_seed, cfg.score_batches, cfg.batch_size, model.block_size)


# ---------------------------------------------------------------------------------------
# the round's scores


@dataclass(frozen=True)
class MinerScore:
    miner: bytes
    score: int  # in [0, MAX_SCORE]
    zero_reason: ZeroReason | None
    usefulness: Usefulness | None
    copy: CopyEvidence | None = None


def absolute_score(relative_gain: float, steps: int, cfg: ComputeConfig) -> int:
    """MAX_SCORE x min(1, gain / score_full_gain) x steps / H, rounded down: verified tokens
    (steps; tokens per step are the same for every miner) times a quality capped on a fixed
    scale, so no other miner's update moves it. Splitting one machine's S steps into identities
    of s_i steps earns sum(min(1, g(s_i)/f) s_i) <= min(1, g(S)/f) S whenever the held-out gain g
    grows with the steps trained: the cap applies before the steps multiply, and rounding down
    never hands a split identity a point its whole would not have had."""
    quality = min(1.0, max(0.0, relative_gain) / cfg.score_full_gain)
    return math.floor(MAX_SCORE * quality * steps / cfg.full_steps)


def class_adjusted(scores: dict[str, int], modes: Mapping[str, CheckMode], discount: float) -> dict[str, int]:
    """Scores as this validator reveals them: 0 for a miner whose class other validators decide,
    or whose committee it holds no seat of (the chain ignores it), the score times `discount` for one checked in tolerance mode.
    Scores are absolute, so validators of different classes share one scale."""
    def adjusted(miner: str, score: int) -> int:
        mode = modes.get(miner, CheckMode.EXACT)
        if not mode.checks:
            return 0
        return int(score * discount) if mode is CheckMode.TOLERANCE else score
    return {miner: adjusted(miner, score) for miner, score in scores.items()}


def zero_reasons(miners: Sequence[bytes], proof_failed: set[bytes],
                 decoded: dict[bytes, DecodedUpdate | None], steps: Mapping[bytes, int],
                 step_norm: float | None, cfg: ComputeConfig,
                 detector: CopyDetector) -> tuple[dict[bytes, ZeroReason], dict[bytes, CopyEvidence]]:
    """Why each zeroed miner is zeroed: proof, then malformed, over-norm, copy."""
    reasons: dict[bytes, ZeroReason] = {m: ZeroReason.PROOF for m in miners if m in proof_failed}
    for m in miners:
        if m not in reasons and decoded.get(m) is None:
            reasons[m] = ZeroReason.MALFORMED
    valid = [u for m, u in decoded.items() if u is not None and m not in reasons]
    for m in over_norm(valid, steps, step_norm, cfg.max_norm_ratio):
        reasons[m] = ZeroReason.OVER_NORM
    copies = {c.copier: c for c in detector.find_copies(valid)}
    for m in copies:
        reasons.setdefault(m, ZeroReason.COPY)
    return reasons, copies


@dataclass(frozen=True)
class RoundEntry:
    task: RoundTask
    commit_order: int
    blob: bytes
    proof_ok: bool  # protocol.verdict.judge(...).kind is None


def usefulness_of(entries: Sequence[RoundEntry], ds: Dataset, theta_r: Params,
                  validator_seed: Digest, strategy: UsefulnessStrategy | None = None,
                  device: str = "cpu") -> dict[bytes, Usefulness]:
    """Usefulness of every decodable update: the costly part of scoring (three loss
    estimates per miner). It needs no proof verdict, so a validator runs it while the
    checkpoints for those verdicts are still arriving. The losses are computed on `device`
    (the profile's); the updates and θ_r stay on the CPU."""
    if not entries:
        return {}
    model_cfg, cfg = entries[0].task.model, entries[0].task.cfg
    strategy = strategy or GauntletUsefulness(cfg.outer_lr, cfg.own_margin, cfg.own_soft_factor)
    model = build_model(model_cfg).to(device)
    heldout = shared_heldout(ds, model_cfg, cfg, validator_seed)
    heldout_before = mean_loss(model, theta_r, heldout)  # shared by all miners: once per round
    useful: dict[bytes, Usefulness] = {}
    for e in entries:
        u = decode_for_scoring(e.task.miner, e.commit_order, e.blob, model_cfg, cfg)
        if u is None:
            continue
        own = own_batches(ds, e.task, validator_seed, cfg.score_batches)
        useful[e.task.miner] = strategy.evaluate(model, theta_r, u.dense, own, heldout, heldout_before)
    return useful


def score_round(entries: Sequence[RoundEntry], ds: Dataset, theta_r: Params,
                validator_seed: Digest, strategy: UsefulnessStrategy | None = None,
                detector: CopyDetector | None = None,
                useful: dict[bytes, Usefulness] | None = None, device: str = "cpu",
                step_norm: float | None = None) -> dict[bytes, MinerScore]:
    """Integer scores for every miner of a round, with the evidence behind each. `useful`:
    `usefulness_of` the same entries, when it was computed ahead of the proof verdicts (else it
    is computed here, its losses on `device`). `step_norm`: θ_r's state's norm reference."""
    if not entries:
        return {}
    model_cfg, cfg = entries[0].task.model, entries[0].task.cfg
    detector = detector or OverlapCosineCopies(cfg.copy_overlap, cfg.copy_cosine)
    miners = [e.task.miner for e in entries]
    decoded = {e.task.miner: decode_for_scoring(e.task.miner, e.commit_order, e.blob, model_cfg, cfg)
               for e in entries}
    failed = {e.task.miner for e in entries if not e.proof_ok}
    steps = {e.task.miner: e.task.cfg.inner_steps for e in entries}
    reasons, copies = zero_reasons(miners, failed, decoded, steps, step_norm, cfg, detector)
    if useful is None:
        useful = usefulness_of([e for e in entries if e.task.miner not in reasons], ds, theta_r,
                               validator_seed, strategy, device)
    useful = {m: u for m, u in useful.items() if m in decoded and m not in reasons}
    ints = {e.task.miner: absolute_score(useful[e.task.miner].relative, steps[e.task.miner], e.task.cfg)
            for e in entries if e.task.miner in useful}
    return {m: MinerScore(m, ints.get(m, 0), reasons.get(m), useful.get(m), copies.get(m))
            for m in miners}
