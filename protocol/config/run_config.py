"""Run config: everything fixed at deploy, loaded from TOML, hashed onto the chain.

Token amounts are written in whole tokens (18 decimals on chain) so a config file
reads naturally. `run_config_hash` covers the whole config, so any node whose local
config differs from the deployed one refuses to run.
"""

from __future__ import annotations

import hashlib
import json
import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from protocol.core.errors import ConfigError

TOKEN_UNIT = 10**18
# validators a column challenge can carry the reveals of (contracts/constants.vy MAX_COMMITTEE): the
# most permits a run without committees may have
EVERY_HOLDER_PERMITS = 16
SCHEMA_VERSION = 1


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ChainParams(_Strict):
    """On-chain settlement parameters."""

    commit_duration: int = Field(600, gt=0)  # seconds miners have to train and commit
    score_duration: int = Field(300, gt=0)  # seconds validators have to replay, score and commit scores
    reveal_duration: int = Field(120, gt=0)  # seconds to reveal scores
    audit_duration: int = Field(120, gt=0)  # seconds after the reveal deadline to audit other validators' witnesses
    audit_sample: int = Field(1, gt=0)  # miners per audited validator an auditor replays per round (off-chain only)
    # auditors drawn per validator per round, by stake (0: every validator audits every other;
    # off-chain only): an auditor's work stays flat as validators grow
    auditors: int = Field(4, ge=0, le=64)
    # audits each node of a round's aggregation tree gets on average: every validator recomputes
    # ceil(tree_audits · nodes / validators) nodes it does not serve, drawn by its own private
    # randomness (off-chain only): they catch a node whose two drawn servers collude, which no
    # waiter would recompute (PROTOCOL.md §13.9)
    tree_audits: int = Field(3, ge=0, le=64)
    challenge_window: int = Field(300, gt=0)  # seconds other validators have to vote on a report
    result_duration: int = Field(420, gt=0)  # seconds after the audit deadline to post a round's result
    result_challenge_window: int = Field(120, gt=0)  # seconds a posted result may be challenged
    challenge_bond: int = Field(10, ge=0)  # tokens a result challenger posts; burned if the value was right
    signer_slash_bps: int = Field(5000, ge=0, le=10_000)  # stake slashed from each signer of a rejected result
    unbonding_delay: int = Field(2400, gt=0)  # must exceed every phase and window of a round
    emission_per_round: int = Field(1000, ge=0)  # tokens a round may mint at most
    miner_share_bps: int = Field(7000, ge=0, le=10_000)  # miners' share of emission; validators get the rest
    min_miner_stake: int = Field(100, gt=0)  # tokens a miner must stake to commit
    min_validator_stake: int = Field(200, gt=0)  # tokens a validator must stake for a permit
    # validator stake (tokens) a hardware class needs for exact checks of its miners; less: every
    # validator checks them in tolerance mode, discounted (None: twice min_validator_stake, so one
    # validator at the minimum never decides a class alone)
    min_class_stake: int | None = Field(None, gt=0)
    # seats of each miner's check committee, drawn by stake from the holders of its class; a
    # validator checks only the miners where it holds one of the 2c drawn seats (c backups); in
    # force for a miner only when more than c holders decide it (so three validators all check);
    # 0: no committees, every holder checks every miner and decides by stake (PROTOCOL §10.8)
    committee: int = Field(3, ge=0, le=16)
    max_validator_permits: int = Field(8, gt=0, le=1024)  # K: at most K validators (contracts/constants.vy MAX_VALIDATORS)
    # tokens a reporter posts per other validator that may vote (each re-checks one segment); burned
    # if its report is rejected: above a segment's share of a miner's pay, R/n (17.5 on the devnet)
    report_bond: int = Field(20, ge=0)
    # tokens burned from an accused whose report is void because the voters were served late
    late_serve_fee: int = Field(20, ge=0)
    slash_bps: int = Field(5000, ge=0, le=10_000)  # fraction of a cheater's stake slashed
    reporter_share_bps: int = Field(2000, ge=0, le=10_000)  # reporter's cut of a slash; rest is burned
    # ended rounds in a row a permitted validator may leave unrevealed (while others reveal)
    # before anyone may end its eligibility (Disputes.retire_absent); 0: never
    absence_rounds: int = Field(3, ge=0, le=16)
    # reports one validator may file per round (Disputes): every report makes every voter of it
    # re-check, so a griefer's reports are capped, not only bonded
    max_reports_per_round: int = Field(16, ge=1)

    @model_validator(mode="after")
    def _unbonding_exceeds_round(self) -> ChainParams:
        if self.result_duration <= self.challenge_window:
            raise ValueError(
                f"result_duration ({self.result_duration}s) must exceed challenge_window ({self.challenge_window}s): "
                "a report filed at the end of the audit phase must resolve before results may no longer be posted"
            )
        if self.unbonding_delay <= self.round_span():
            raise ValueError(
                f"unbonding_delay ({self.unbonding_delay}s) must exceed all of a round's phases and windows "
                f"(commit, score, reveal, audit, report votes, result posting and its challenge window: "
                f"{self.round_span()}s), so no signer or reporter can leave before it can be slashed"
            )
        if self.committee == 0 and self.max_validator_permits > EVERY_HOLDER_PERMITS:
            raise ValueError(
                f"committee = 0 (every holder decides each column) allows at most {EVERY_HOLDER_PERMITS} "
                f"max_validator_permits, not {self.max_validator_permits}: a column challenge carries the reveal of "
                "each validator that decides the column; set committee >= 1 to permit more validators"
            )
        return self

    @property
    def class_stake(self) -> int:
        """Tokens of validator stake a class needs for exact checks (`min_class_stake`, resolved)."""
        return self.min_class_stake if self.min_class_stake is not None else 2 * self.min_validator_stake

    def round_span(self) -> int:
        """Seconds from a round's opening to the end of its result's challenge window, at most."""
        phases = self.commit_duration + self.score_duration + self.reveal_duration + self.audit_duration
        return phases + self.challenge_window + self.result_duration + self.result_challenge_window


class GenesisAllocation(_Strict):
    address: str = Field(pattern=r"^0x[0-9a-fA-F]{40}$")
    amount: int = Field(gt=0)  # whole tokens


class RunConfig(_Strict):
    """The whole run config. `training` is hashed as given; the training core validates it."""

    schema_version: int = SCHEMA_VERSION
    run_name: str = "veritrain-dev"
    run_seed: int = 0  # seeds page assignment and batch order for every miner
    chain: ChainParams = ChainParams()
    training: dict[str, Any] = Field(default_factory=dict)  # model preset, H, k, compression, outer step
    genesis_model_hash: str | None = None  # hex; None = derived from the training section
    genesis: list[GenesisAllocation] = Field(default_factory=list)  # empty = all to the deployer
    genesis_supply: int = Field(10_000_000, gt=0)  # whole tokens for the deployer when `genesis` is empty

    def canonical_json(self) -> bytes:
        return json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":")).encode()

    def config_hash(self) -> bytes:
        return hashlib.sha256(b"veritrain/run-config/v1" + self.canonical_json()).digest()

    def genesis_hash(self) -> bytes:
        """The genesis model id. The model is initialized deterministically from the
        training section, so until the training core supplies the hash of the
        initialized weights this digest of that section identifies it."""
        if self.genesis_model_hash:
            return bytes.fromhex(self.genesis_model_hash.removeprefix("0x"))
        body = json.dumps(self.training, sort_keys=True, separators=(",", ":")).encode()
        return hashlib.sha256(b"veritrain/genesis/v1" + body).digest()


def load_run_config(path: Path | None) -> RunConfig:
    """Load a TOML run config, or the defaults when `path` is None."""
    if path is None:
        return RunConfig()
    try:
        data = tomllib.loads(Path(path).read_text())
    except FileNotFoundError as exc:
        raise ConfigError(f"run config {path} not found") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"run config {path} is not valid TOML: {exc}") from exc
    try:
        return RunConfig.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ConfigError(f"run config {path}: {where}: {first['msg']}") from exc
