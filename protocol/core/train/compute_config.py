"""Every training, compression, verification and aggregation default of a run, in one frozen
dataclass (`ComputeConfig`; it goes on chain at deploy), and the step counts a miner may commit.

Torch-free: the chain, the deploy command and the blob caps read it without loading torch
(an import-linter contract in pyproject.toml keeps it so).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from protocol.core.errors import ConfigError
from protocol.core.settlement.result_inputs import MAX_MINERS

# float32-v1: bits depend on threads, ISA, device; exact-v1: on neither; exact-sum-v1: nor on grouping
AGGREGATION_RULES = ("float32-v1", "exact-v1", "exact-sum-v1")
INT64_LIMIT = 1 << 63  # exact-sum-v1's integer sums stay below it
INT32_LIMIT = 1 << 31  # ... and its per-coordinate weights below this


class StepCountError(ConfigError):
    """Raised when a step count is not one a miner of this run may commit."""


@dataclass(frozen=True)
class ComputeConfig:
    # --- inner loop (DiLoCo) ---
    inner_steps: int = 30  # H: AdamW steps per round, the most a miner may train (capacity-scaled work)
    checkpoint_every: int = 3  # k: steps per replay segment (H/k = 10 segments)
    min_inner_steps: int = 0  # the fewest a miner may commit, a multiple of k; 0 = k x segments_per_validator
    batch_size: int = 8  # sequences per inner step
    pages_per_miner: int = 8  # data pages assigned to each miner per round
    inner_lr: float = 7.5e-4  # AdamW learning rate (with the carried second moment: benchmarks/VS_DDP.md)
    beta1: float = 0.9  # AdamW first-moment decay
    beta2: float = 0.95  # AdamW second-moment decay (nanoGPT)
    eps: float = 1e-8  # AdamW denominator epsilon
    weight_decay: float = 0.1  # decoupled, on matrices only (nanoGPT)
    grad_clip: float = 1.0  # global gradient-norm clip per inner step
    # --- compression (SparseLoCo) ---
    chunk: int = 4096  # values per top-k chunk
    topk: int = 192  # values kept per chunk (4.7%: 561x less traffic than DDP; benchmarks/VS_DDP.md)
    bits: int = 2  # value quantization: 2 (default) or 8 (int8)
    ef_decay: float = 1.0  # error-feedback carry factor (1.0 = keep the whole residual)
    # --- verification ---
    segments_per_validator: int = 1  # q: segments each validator replays
    tolerance: float = 1e-4  # δ for tolerance mode: relative L2 distance (flagged)
    tolerance_discount: float = 0.5  # a tolerance-checked miner's score is multiplied by this
    # --- scoring ---
    # batches per loss estimate (own data and held-out): 4 rank every useless adversary far below every
    # honest miner (tests/validator/test_cheap_scoring.py) at half the cost of 8 (benchmarks scale)
    score_batches: int = 4
    own_margin: float = 0.02  # own-data gain may trail held-out gain by this much unpenalised
    own_soft_factor: float = 0.5  # multiplier when it trails by more (soft, never zero)
    # the relative held-out gain (loss decrease over loss) per round that earns a full score: a
    # score is MAX x min(1, gain / this) x steps / H, absolute (validator/scoring.py)
    score_full_gain: float = 0.05
    max_norm_ratio: float = 5.0  # an update whose norm per step exceeds this x the state's reference is zeroed
    copy_overlap: float = 0.9  # top-k index overlap (Jaccard) above which a copy is suspected
    copy_cosine: float = 0.97  # ... and cosine similarity above which it is declared
    # --- aggregation / outer step ---
    clip_multiplier: float = 1.0  # clip each update's norm to this x the lower median norm per step x its steps
    trim_fraction: float = 0.2  # per-coordinate trimmed mean: drop this share at each end
    outer_lr: float = 1.0  # outer SGD learning rate (plain averaging: calibration favoured it)
    outer_momentum: float = 0.0  # 0.0 = no momentum; DiLoCo uses 0.9 with lr 0.7
    nesterov: bool = False  # Nesterov outer momentum (used when outer_momentum > 0)
    # rule version (AGGREGATION_RULES): exact-sum-v1's bits depend neither on the device nor on grouping,
    # and it holds one dense update at a time, so every verified update can count (exact-v1 holds all)
    aggregation: str = "exact-sum-v1"
    # exact-sum-v1 (protocol/core/aggregation/exact_sum_v1.py): fixed point with f fraction bits, each
    # coordinate clamped to ±2^b; MAX_MINERS · H · 2^(b+f) < 2^63 keeps every integer sum exact
    sum_fraction_bits: int = 30  # f: a resolution of 9.3e-10
    sum_bound_bits: int = 4  # b: |coordinate| <= 16 (a pseudo-gradient coordinate is far below)
    # exact-sum-v1's public clip: an update's norm to this x the state's norm per step x its steps. The
    # reference is the previous round's median, and norms per step grow while a model starts to learn:
    # at 1.0 most updates were clipped and micro's held-out loss after 6 rounds was 3.15 for 3.05 (2.0)
    sum_clip_multiplier: float = 2.0
    first_step_norm: float = 0.0  # the norm per step the clip uses at genesis (0: no norm clip until a round sets one)
    # --- set by with_steps only, never by a run ---
    round_steps: int = 0  # H of the run when this is one miner's shortened round; 0: inner_steps is H

    def __post_init__(self) -> None:
        if self.inner_steps <= 0 or self.checkpoint_every <= 0:
            raise ConfigError("inner_steps and checkpoint_every must be positive")
        if self.inner_steps % self.checkpoint_every:
            raise ConfigError("inner_steps must be a multiple of checkpoint_every")
        if self.bits not in (2, 8):
            raise ConfigError("bits must be 2 or 8")
        if not 0 < self.topk <= self.chunk or self.chunk > 1 << 15:
            raise ConfigError("need 0 < topk <= chunk <= 32768")
        if not 0 < self.segments_per_validator <= self.n_segments:
            raise ConfigError("segments_per_validator must be in [1, H/k]")
        if self.min_inner_steps < 0 or self.min_inner_steps % self.checkpoint_every:
            raise ConfigError("min_inner_steps must be a non-negative multiple of checkpoint_every")
        if not self.checkpoint_every * self.segments_per_validator <= self.min_steps <= self.inner_steps:
            raise ConfigError("min_inner_steps must be in [checkpoint_every x segments_per_validator, inner_steps]")
        if not 0.0 <= self.tolerance_discount <= 1.0 or not self.tolerance > 0.0:
            raise ConfigError("tolerance must be positive and tolerance_discount in [0, 1]")
        if not 0.0 < self.score_full_gain <= 1.0:
            raise ConfigError("score_full_gain must be in (0, 1]")
        if self.round_steps and self.round_steps < self.inner_steps:
            raise ConfigError("round_steps (set by with_steps) must be at least inner_steps")
        if self.aggregation not in AGGREGATION_RULES:
            raise ConfigError(f"aggregation {self.aggregation!r} is not one of {', '.join(AGGREGATION_RULES)}")
        if self.aggregation == "exact-sum-v1":
            self._check_fixed_point()

    def _check_fixed_point(self) -> None:
        if (self.sum_fraction_bits < 0 or self.sum_bound_bits < -self.sum_fraction_bits or not self.first_step_norm >= 0
                or not self.sum_clip_multiplier > 0):
            raise ConfigError("need sum_fraction_bits >= 0, sum_bound_bits >= -sum_fraction_bits, first_step_norm >= 0 "
                              "and sum_clip_multiplier > 0")
        if MAX_MINERS * self.full_steps >= INT32_LIMIT:  # a coordinate's weight travels as int32
            raise ConfigError(f"exact-sum-v1 weighs a coordinate by at most {MAX_MINERS} x H steps: H "
                              f"{self.full_steps} takes it past 2^31")
        largest = MAX_MINERS * self.full_steps << (self.sum_bound_bits + self.sum_fraction_bits)
        if largest >= INT64_LIMIT:
            raise ConfigError(f"exact-sum-v1 could overflow: {MAX_MINERS} miners x {self.full_steps} steps x "
                              f"2^(sum_bound_bits + sum_fraction_bits) = 2^{largest.bit_length() - 1} is not below 2^63")

    @property
    def n_segments(self) -> int:
        return self.inner_steps // self.checkpoint_every

    @property
    def full_steps(self) -> int:
        """H, the run's full round, also for one miner's shortened round."""
        return self.round_steps or self.inner_steps

    @property
    def min_steps(self) -> int:
        """The fewest inner steps a miner may commit (each validator still has q segments to replay)."""
        return self.min_inner_steps or self.checkpoint_every * self.segments_per_validator

    def allowed_steps(self) -> range:
        """The step counts a miner may commit: multiples of k from `min_steps` to H."""
        return range(self.min_steps, self.inner_steps + 1, self.checkpoint_every)

    def allows_steps(self, steps: int) -> bool:
        """Whether a miner may commit `steps` (0 stands for H)."""
        return steps == 0 or steps in self.allowed_steps()

    def with_steps(self, steps: int) -> ComputeConfig:
        """This config for one miner's round of `steps` inner steps (0: H, the full round), the
        config its trace, replay and challenges follow. StepCountError unless it is allowed."""
        if steps == 0 or steps == self.inner_steps:
            return self
        if not self.allows_steps(steps):
            raise StepCountError(f"{steps} inner steps is not a multiple of {self.checkpoint_every} "
                                 f"in [{self.min_steps}, {self.inner_steps}]")
        return dataclasses.replace(self, inner_steps=steps, min_inner_steps=self.min_steps,
                                   round_steps=self.inner_steps)
