"""The chain facts a round's result is computed from (docs/PROTOCOL.md §11.2), checked on construction.

Everything here is read from the chain by the shell; validating it once means `compute_result`
can do plain integer arithmetic and every helper that rebuilds a round sees the same inputs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from protocol.core.crypto.keccak import checksum_address
from protocol.core.errors import ResultError
from protocol.core.settlement.class_checks import class_checkers, column_deciders, covered
from protocol.core.settlement.column_weights import ColumnWeights, column_weights
from protocol.core.settlement.score_vector import SCORE_MAX, pack_segments, unpack_segments

MAX_MINERS = 16_384  # columns per round (spec caps)
MAX_VALIDATORS = 1024
MAX_COMMITTEE = 16  # seats of a check committee (contracts/constants.vy)
BPS = 10_000
UINT256_MAX = 2**256 - 1
WORD_BYTES = 32


def _check_uint(name: str, value: int, top: int = UINT256_MAX) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= top:
        raise ResultError(f"{name} must be an integer in 0..{top}, not {value!r}")


def _check_accounts(name: str, accounts: Iterable[str]) -> None:
    seen: set[str] = set()
    for account in accounts:
        try:
            canonical = checksum_address(account)
        except ValueError as exc:
            raise ResultError(f"{name}: {account!r} is not an address") from exc
        if canonical != account:
            raise ResultError(f"{name}: {account} is not checksummed ({canonical})")
        if account in seen:
            raise ResultError(f"{name}: {account} appears twice")
        seen.add(account)


@dataclass(frozen=True)
class Reveal:
    """One validator's revealed vector: a score per column, its held-out loss (1e6 = 1.0), witness
    root, and its segments as revealed on chain (None: `pack_segments` of the scores; a node may
    reveal any bytes, which bind its vector root, so evidence carries them as they were)."""

    scores: tuple[int, ...]
    heldout_loss: int
    witness_root: bytes
    segments: tuple[bytes, ...] | None = None

    def __post_init__(self) -> None:
        for score in self.scores:
            _check_uint("score", score, SCORE_MAX)
        _check_uint("heldout_loss", self.heldout_loss)
        if not isinstance(self.witness_root, bytes) or len(self.witness_root) != WORD_BYTES:
            raise ResultError("witness_root must be 32 bytes")
        if self.segments is not None and unpack_segments(self.segments, len(self.scores)) != self.scores:
            raise ResultError("a reveal's segments do not hold its scores")

    @property
    def revealed_segments(self) -> tuple[bytes, ...]:
        return tuple(pack_segments(self.scores)) if self.segments is None else self.segments


@dataclass(frozen=True)
class PrevEntry:
    """An account's latest entry in an earlier final round: `round` q itself (the leaf stores q + 1),
    its column or validator-entry `index` there, and the values it carried."""

    round: int
    index: int
    reputation: int  # uint16; 0 for validators, whose entries carry none
    cumulative: int

    def __post_init__(self) -> None:
        _check_uint("prev round", self.round)
        _check_uint("prev index", self.index)
        _check_uint("prev reputation", self.reputation, SCORE_MAX)
        _check_uint("prev cumulative", self.cumulative)


@dataclass(frozen=True)
class RoundInputs:
    """Round `round`'s chain facts. `reveals` holds only the validators that revealed."""

    round: int
    miners: tuple[str, ...]  # column order = commit order
    validators: tuple[str, ...]  # Rounds.validators_of(round) order
    weights: tuple[int, ...]  # snapshot weight of each validator, same order
    reveals: Mapping[str, Reveal]
    forfeited: frozenset[str]
    prev: Mapping[str, PrevEntry]  # latest earlier final entry of each account that has one
    emission: int  # Rewards.emission_per_round
    miner_share_bps: int  # the miners' part of it, in basis points
    # hardware classes (Staking.hardware_classes, never changed once staked): one set per miner
    # and per validator, same orders; empty: nobody set one (all run class 0)
    miner_classes: tuple[int, ...] = ()
    validator_classes: tuple[int, ...] = ()
    min_class_weight: int = 0  # Staking.min_class_stake: a class with less checker weight is tolerance-checked
    committee_size: int = 0  # Staking.committee_size: seats of each miner's check committee; 0: no committees
    seed: bytes = bytes(WORD_BYTES)  # the round's seed (Rounds.round_info): draws the committees

    def __post_init__(self) -> None:
        _check_uint("round", self.round)
        self._check_participants()
        self._check_reveals()
        self._check_history()
        _check_uint("emission", self.emission)
        _check_uint("miner_share_bps", self.miner_share_bps, BPS)
        self._check_classes()

    def _check_participants(self) -> None:
        if len(self.miners) > MAX_MINERS or len(self.validators) > MAX_VALIDATORS:
            raise ResultError(f"at most {MAX_MINERS} miners and {MAX_VALIDATORS} validators per round")
        _check_accounts("miners", self.miners)
        _check_accounts("validators", self.validators)
        both = set(self.miners) & set(self.validators)
        if both:  # Staking fixes one role per account, and a claim leaf per account must be unique
            raise ResultError(f"accounts are both miner and validator: {sorted(both)}")
        if len(self.weights) != len(self.validators):
            raise ResultError(f"{len(self.weights)} weights for {len(self.validators)} validators")
        for weight in self.weights:
            _check_uint("weight", weight)

    def _check_reveals(self) -> None:
        for account, reveal in self.reveals.items():
            if account not in self.validators:
                raise ResultError(f"reveal by {account}, not a validator of round {self.round}")
            if len(reveal.scores) != self.n:
                raise ResultError(f"{account} revealed {len(reveal.scores)} scores for {self.n} columns")

    def _check_history(self) -> None:
        participants = set(self.miners) | set(self.validators)
        for account in self.forfeited:
            if account not in participants:
                raise ResultError(f"forfeited {account} takes no part in round {self.round}")
        for account, entry in self.prev.items():
            if account not in participants:
                raise ResultError(f"prev entry of {account}, who takes no part in round {self.round}")
            if entry.round >= self.round:
                raise ResultError(f"{account}'s prev entry is from round {entry.round}, not before {self.round}")

    def _check_classes(self) -> None:
        for name, masks, accounts in (("miner_classes", self.miner_classes, self.miners),
                                      ("validator_classes", self.validator_classes, self.validators)):
            if masks and len(masks) != len(accounts):
                raise ResultError(f"{len(masks)} {name} for {len(accounts)} accounts")
            for mask in masks:
                _check_uint(name, mask)
        _check_uint("min_class_weight", self.min_class_weight)
        _check_uint("committee_size", self.committee_size, MAX_COMMITTEE)
        if not isinstance(self.seed, bytes) or len(self.seed) != WORD_BYTES:
            raise ResultError("seed must be 32 bytes")

    def _checkers(self, column: int) -> tuple[bool, ...]:
        miner = self.miner_classes[column] if self.miner_classes else 0
        return class_checkers(miner, self.validator_classes or (0,) * len(self.validators))

    def deciders(self, column: int) -> tuple[bool, ...]:
        """Per validator, whether its score decides `column` (protocol/core/settlement/class_checks.py)."""
        return column_deciders(self.weights, self._checkers(column), self.min_class_weight)

    def column_weights(self, column: int) -> ColumnWeights:
        """How much each validator's score counts in `column` (protocol/core/settlement/column_weights.py)."""
        # a forfeited validator decides nothing: a confirmed report against it voids its numbers,
        # so a caught lie moves no score (with committees its seats pass to backups)
        return column_weights(self.weights, self.deciders(column), self.committee_size, self.seed,
                              bytes.fromhex(self.miners[column][2:]), tuple(v in self.reveals for v in self.validators),
                              tuple(v in self.forfeited for v in self.validators))

    def counted(self, validator: str) -> bool:
        """Whether `validator`'s scores count in the round's columns: it revealed, and no report
        against it was confirmed."""
        return validator in self.reveals and validator not in self.forfeited

    def exact_column(self, column: int) -> bool:
        """Whether `column`'s miner was checked bit for bit (validators holding its class carry
        the minimum stake) rather than in tolerance mode."""
        return covered(self.weights, self._checkers(column), self.min_class_weight)

    @property
    def n(self) -> int:
        """The number of columns (miners that committed)."""
        return len(self.miners)

    @property
    def miner_pool(self) -> int:
        """P_m: the miners' part of the emission."""
        return self.emission * self.miner_share_bps // BPS

    @property
    def validator_pool(self) -> int:
        """P_v: the rest of the emission."""
        return self.emission - self.miner_pool

    def prev_pointer(self, account: str) -> tuple[int, int]:
        """(prev, prev_index) as a leaf or entry stores them: (q + 1, index), or (0, 0) without history."""
        entry = self.prev.get(account)
        return (0, 0) if entry is None else (entry.round + 1, entry.index)
