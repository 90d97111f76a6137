"""The deployment file: which chain, which contracts, which run config, which blob size caps."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from protocol.config.atomic import atomic_write
from protocol.config.run_config import RunConfig
from protocol.core.errors import ConfigError
from protocol.core.wire.blob_caps import BlobCaps, blob_caps

ADDRESS = r"^0x[0-9a-fA-F]{40}$"


class ContractAddresses(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    token: str = Field(pattern=ADDRESS)
    staking: str = Field(pattern=ADDRESS)
    keys: str = Field(pattern=ADDRESS)  # validators' BLS keys and the cached aggregate keys
    rounds: str = Field(pattern=ADDRESS)  # round clock and update commits (bound into update hashes)
    scores: str = Field(pattern=ADDRESS)  # score vectors as calldata (bound into vector roots)
    rewards: str = Field(pattern=ADDRESS)  # emission, Merkle cumulative claims; the token's only minter
    results: str = Field(pattern=ADDRESS)  # BLS-certified round results (bound into result roots)
    column_challenges: str = Field(pattern=ADDRESS)  # recompute one column's values
    tree_challenges: str = Field(pattern=ADDRESS)  # recompute the sum tree's shape or a node; demands of its parts
    account_challenges: str = Field(pattern=ADDRESS)  # recompute a header word, an account's history or entry
    claims_challenges: str = Field(pattern=ADDRESS)  # recompute the claims root, a claims chunk or a claim
    disputes: str = Field(pattern=ADDRESS)


class Deployment(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    schema_version: int = 4  # 3: tree_challenges split out of column_challenges; 4: claims_challenges
    chain_id: int
    deploy_block: int  # event scans start here
    deployer: str = Field(pattern=ADDRESS)
    contracts: ContractAddresses
    run_config: RunConfig
    run_config_hash: str  # hex, as stored in Rounds.run_config_hash
    sources_hash: str  # contracts + compiler + snekmate, for reproducible builds
    # bytes a node accepts per fetched blob of each kind (protocol/core/wire/blob_caps.py), computed
    # from run_config by `deploy`; None in files written before caps were recorded
    blob_caps: BlobCaps | None = None

    def resolved_blob_caps(self) -> BlobCaps:
        """The recorded caps, or for an older file the ones its run config implies."""
        return self.blob_caps if self.blob_caps is not None else run_blob_caps(self.run_config)


def run_blob_caps(config: RunConfig) -> BlobCaps:
    """The per-kind blob caps of a run: from its model preset and compute config (torch-free)."""
    # imported only when caps are computed: `veritrain inspect` starts without it
    from protocol.config.run_setup import resolve

    setup = resolve(config)
    return blob_caps(setup.model, setup.compute)


def save_deployment(deployment: Deployment, path: Path) -> None:
    """Write atomically so a crash never leaves a truncated deployment file."""
    atomic_write(Path(path), deployment.model_dump_json(indent=2).encode(), prefix=".deployment-")


def load_deployment(path: Path) -> Deployment:
    try:
        text = Path(path).read_text()
    except FileNotFoundError as exc:
        raise ConfigError(f"deployment file {path} not found") from exc
    try:
        return Deployment.model_validate(json.loads(text))
    except (json.JSONDecodeError, ValidationError) as exc:
        raise ConfigError(f"deployment file {path} is corrupt or not a veritrain deployment") from exc
