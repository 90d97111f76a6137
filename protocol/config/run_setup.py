"""From the run config's `[training]` section to the objects nodes compute with.

Torch-free: the chain, the explorer and `veritrain inspect`/`claim` read it (an import-linter
contract keeps it so). `veritrain deploy` pins the hashes every node must reproduce (model
config, dataset root, replay profile, genesis global state: `run_state.pinned_hashes`, run in a
worker by `protocol.node.pinning.prepare`); nodes call `check_local` and refuse to run on any
difference, with an error that says what differs. `[[training.classes]]` lists the permitted
hardware classes (`protocol.core.hardware.hardware_class`); the profile, the class a node runs when it
names none, must be one of them. `[training.model]` overrides fields of the model preset;
`[training.genesis]` starts the run from a Hugging Face Llama checkpoint instead of seeded
initial weights (`veritrain deploy --genesis` writes both tables).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, model_validator

from protocol.config.model_overrides import apply_overrides
from protocol.config.run_config import RunConfig
from protocol.config.stage_fields import (
    DEFAULT_MICROBATCHES,
    check_microbatches,
    check_stage_fields,
)
from protocol.core.aggregation.selection import UnknownSelectionRule, check_rule
from protocol.core.crypto.hashing import blake3_hash
from protocol.core.errors import ConfigError
from protocol.core.hardware.hardware_class import MAX_CLASSES, class_id, default_classes, label
from protocol.core.hardware.replay_profile import ReplayProfile
from protocol.core.hardware.stage_classes import check_chain_width, stage_class_list
from protocol.core.model.config import ModelConfig, preset
from protocol.core.pipeline.stage_split import MAX_STAGES, StageSplit, split_model
from protocol.core.settlement.result_inputs import MAX_MINERS
from protocol.core.train.compute_config import ComputeConfig

_PROFILE = TypeAdapter(ReplayProfile)


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class DatasetSpec(_Strict):
    source: Literal["stdlib", "folder", "bin", "packed"] = "stdlib"  # stdlib: this Python's own .py files
    path: str | None = None  # folder of text files, a uint16 .bin, or `veritrain data pack`'s corpus.bin
    page_tokens: int = Field(4096, gt=0)  # tokens per content-addressed page
    heldout_every: int = Field(20, ge=2)  # one page in this many is held out
    # packed only, from the corpus's sidecar (`data pack` prints them); checked at load when set
    tokenizer_hash: str | None = Field(None, pattern=r"^[0-9a-f]{64}$")  # blake3 of tokenizer.json
    vocab_size: int | None = Field(None, gt=0)  # the tokenizer's, special tokens included

    @model_validator(mode="after")
    def _tokenizer_only_when_packed(self) -> DatasetSpec:
        if self.source != "packed" and (self.tokenizer_hash is not None or self.vocab_size is not None):
            raise ConfigError(f"[training.dataset] tokenizer_hash and vocab_size apply to source "
                              f"'packed', not {self.source!r} (whose tokens are bytes)")
        return self


class GenesisSpec(_Strict):
    """Genesis θ from a checkpoint instead of `init_params` (written by `veritrain deploy --genesis`)."""

    path: str  # absolute folder with config.json and *.safetensors; every node needs a copy there
    format: Literal["hf-llama"] = "hf-llama"  # the Hugging Face Llama layout


class TrainingSpec(_Strict):
    preset: str = "tiny"  # model preset (micro, tiny, small, gpt2, llama-*)
    # ModelConfig/LlamaConfig field overrides on the preset (`family = "llama"` switches class)
    model: dict[str, float | int | bool | str] = Field(default_factory=dict)
    init_seed: int = 0  # seeds the genesis weights (unless `genesis` names a checkpoint)
    genesis: GenesisSpec | None = None
    dataset: DatasetSpec = DatasetSpec()
    profile: ReplayProfile = Field(default_factory=ReplayProfile)  # the default class; torch_version pinned by deploy
    # permitted hardware classes; omitted: `default_classes(profile)` (torch_version pinned like the profile's)
    classes: list[ReplayProfile] = Field(default_factory=list)
    compute: dict[str, float | int | bool | str] = Field(default_factory=dict)  # ComputeConfig overrides
    # consensus: which updates form θ_{r+1} (a name in SELECTION_RULES) and how many at most
    selection: str = "top-consensus-v1"  # top_g by positive consensus, ties by the lower address
    # updates aggregated per round at most; the default admits every verified update (a round's
    # bound): exact-sum-v1 holds one update at a time, exact-v1 all of them (pair it with a top_g)
    top_g: int = Field(MAX_MINERS, gt=0, le=MAX_MINERS)
    # the aggregation tree's fan-in (PROTOCOL.md §13.9): 0 = flat, every validator sums every
    # selected update itself; f >= 2 = a tree of fan-in f whose nodes drawn validators compute and
    # serve (exact-sum-v1 only: its bits do not depend on the grouping). With its audits it pays above ~700 miners
    fan_in: int = Field(0, ge=0, le=MAX_MINERS)
    heldout_batches: int = Field(8, gt=0)  # batches in the attested held-out loss validators reveal
    # pipeline stages (PROTOCOL.md §16): 0 = every miner trains the whole model; S >= 2 splits it into
    # S contiguous stages (`pipeline/stage_split.py`), each trained by miners registered for it
    stages: int = Field(0, ge=0, le=MAX_STAGES)
    microbatches: int = Field(DEFAULT_MICROBATCHES, gt=0)  # GPipe microbatches per inner step of a staged run
    # per stage, its permitted hardware classes; empty: every stage permits `classes`
    stage_classes: list[list[ReplayProfile]] = Field(default_factory=list)
    # pinned by `veritrain deploy`; nodes must reproduce them
    model_config_hash: str | None = None
    dataset_root: str | None = None
    profile_hash: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _default_classes(cls, data: Any) -> Any:
        """Omitted classes are the default three on the profile's torch build, plus the profile."""
        if not isinstance(data, dict) or "classes" in data:
            return data
        try:
            profile = _PROFILE.validate_python(data.get("profile", {}))
        except ValidationError:
            return data  # the field's own validation reports it, with its location
        return {**data, "classes": default_classes(profile)}

    @model_validator(mode="after")
    def _selection_is_known(self) -> TrainingSpec:
        try:
            check_rule(self.selection)
        except UnknownSelectionRule as exc:
            raise UnknownSelectionRule(f"[training] selection: {exc}") from exc
        return self

    @model_validator(mode="after")
    def _tree_is_exact(self) -> TrainingSpec:
        if self.fan_in == 1:
            raise ConfigError("[training] fan_in: 0 (flat) or at least 2")
        rule = self.compute.get("aggregation", ComputeConfig.aggregation)
        if self.fan_in and rule != "exact-sum-v1":
            raise ConfigError(f"[training] fan_in needs aggregation = \"exact-sum-v1\" (its sums do not depend "
                              f"on the grouping), not {rule!r}")
        return self

    @model_validator(mode="after")
    def _stages_are_whole(self) -> TrainingSpec:
        check_stage_fields(self.stages, self.microbatches, len(self.stage_classes), self.fan_in)
        for s, permitted in enumerate(self.stage_classes):
            ids = [class_id(c) for c in permitted]
            if not ids or len(set(ids)) != len(ids):
                raise ConfigError(f"[training.stage_classes] stage {s} lists no hardware class, or one twice")
            stray = [label(c) for c in permitted if c not in self.classes]
            if stray:  # the chain registers the run's classes; a stage narrows them
                raise ConfigError(f"[training.stage_classes] stage {s} permits {', '.join(stray)}, not among "
                                  f"[training.classes]")
        return self

    @model_validator(mode="after")
    def _profile_is_permitted(self) -> TrainingSpec:
        ids = [class_id(c) for c in self.classes]
        if len(set(ids)) != len(ids):
            raise ConfigError("[training.classes] lists a hardware class twice")
        if len(ids) > MAX_CLASSES:
            raise ConfigError(f"[training.classes] lists {len(ids)} hardware classes; a run permits at most {MAX_CLASSES}")
        if self.profile not in self.classes:
            permitted = ", ".join(label(c) for c in self.classes) or "none"
            raise ConfigError(f"[training.profile] {label(self.profile)} is not among the permitted "
                              f"[training.classes] ({permitted})")
        return self


@dataclass(frozen=True)
class Setup:
    spec: TrainingSpec
    run_seed: bytes

    @property
    def model(self) -> ModelConfig:
        # the type is in the cache key: True == 1 == 1.0, but only one of them is a valid n_layer
        return _model_config(self.spec.preset, tuple(sorted((k, type(v).__name__, v) for k, v in self.spec.model.items())))

    @property
    def compute(self) -> ComputeConfig:
        known = {f.name for f in fields(ComputeConfig)} - {"round_steps"}  # with_steps sets it, never a run
        unknown = set(self.spec.compute) - known
        if unknown:
            raise ConfigError(f"[training.compute] has unknown keys: {sorted(unknown)}")
        text = {f.name for f in fields(ComputeConfig) if f.type in (str, "str")}
        wrong = sorted(k for k, v in self.spec.compute.items() if isinstance(v, str) != (k in text))
        if wrong:  # the dict admits strings for `aggregation`; no other key takes one
            raise ConfigError(f"[training.compute] has values of the wrong type for {wrong}")
        return ComputeConfig(**self.spec.compute)  # type: ignore[arg-type]

    @property
    def stage_split(self) -> StageSplit | None:
        """The model's stages (None: every miner trains the whole model)."""
        return split_model(self.model, self.spec.stages) if self.spec.stages else None

    def stage_classes(self, stage: int) -> list[ReplayProfile]:
        """The hardware classes permitted to train or replay stage `stage`."""
        return self.spec.stage_classes[stage] if self.spec.stage_classes else self.spec.classes

    @property
    def stage_permitted(self) -> list[list[ReplayProfile]]:
        """Per stage, its permitted classes (empty without stages): what `stage_classes.py` maps to bits."""
        return [self.stage_classes(s) for s in range(self.spec.stages)]

    @property
    def chain_classes(self) -> int:
        """How many entries the chain's class list has: the classes, or a staged run's (class, stage) pairs."""
        if not self.spec.stages:
            return len(self.spec.classes)
        return len(stage_class_list(self.spec.classes, self.stage_permitted))

    @property
    def profile(self) -> ReplayProfile:
        return self.spec.profile

    @property
    def classes(self) -> list[ReplayProfile]:
        return self.spec.classes

    def in_class(self, profile: ReplayProfile) -> Setup:
        """This setup for a node running permitted class `profile`: its worker trains and replays
        under it. Everything hashed into the run (model, data, genesis, aggregation) is the same
        on every class; only the profile a replay is checked against differs."""
        if profile not in self.spec.classes:
            permitted = ", ".join(label(c) for c in self.spec.classes)
            raise ConfigError(f"hardware class {label(profile)} is not permitted by this run (permitted: {permitted})")
        return Setup(self.spec.model_copy(update={"profile": profile}), self.run_seed)


@functools.lru_cache(maxsize=8)
def _model_config(preset_name: str, overrides: tuple[tuple[str, str, float | int | bool | str], ...]) -> ModelConfig:
    return apply_overrides(preset(preset_name), {k: v for k, _, v in overrides})


def training_spec(config: RunConfig) -> TrainingSpec:
    try:
        return TrainingSpec.model_validate(config.training)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise ConfigError(f"[training] {'.'.join(map(str, first['loc']))}: {first['msg']}") from exc


def resolve(config: RunConfig) -> Setup:
    setup = Setup(training_spec(config), blake3_hash("run-seed", config.run_seed.to_bytes(8, "big")))
    check_committee_detection(config.chain.committee, setup.compute)
    try:  # the split refuses a tied Llama, or more stages than blocks
        staged = setup.stage_split is not None
    except ConfigError as exc:
        raise ConfigError(f"[training] stages: {exc}") from exc
    if staged:
        check_microbatches(setup.compute.batch_size, setup.spec.microbatches)
        check_chain_width(setup.classes, setup.stage_permitted)
    return setup


def check_committee_detection(committee: int, compute: ComputeConfig) -> None:
    """Refuse committees whose checkers, challenging q segments each, would catch a one-segment
    fake less often than three validators that all check it at q = 1 (docs/PROTOCOL.md §10.8)."""
    if committee == 0:
        return
    from protocol.core.settlement.committee_odds import REFERENCE_VALIDATORS, committee_per_check

    need = committee_per_check(committee, compute.n_segments)
    if compute.segments_per_validator < need:
        raise ConfigError(f"committees of {committee} need [training.compute] segments_per_validator >= {need} "
                          f"(it is {compute.segments_per_validator}) to catch a one-segment fake as often as "
                          f"{REFERENCE_VALIDATORS} validators that all check it")


def check_vocabulary(model_vocab: int, data_vocab: int, dataset: DatasetSpec) -> None:
    """The model must have an embedding row for every token the corpus can hold."""
    if model_vocab < data_vocab:
        hint = (f"set [training.model] vocab_size = {data_vocab}" if dataset.source == "packed"
                else "byte corpora need vocab_size >= 256")
        raise ConfigError(f"the model's vocab_size {model_vocab} is smaller than the corpus's {data_vocab} "
                          f"({dataset.source} dataset): {hint}")


def check_genesis_present(spec: TrainingSpec) -> None:
    """Fail at once (before a worker starts) when this node lacks the run's genesis checkpoint."""
    if spec.genesis is not None and not (Path(spec.genesis.path) / "config.json").is_file():
        raise ConfigError(f"the run's genesis checkpoint {spec.genesis.path} ([training.genesis]) is missing "
                          f"on this node: copy the run's checkpoint folder to that path")


def check_local(config: RunConfig, local: dict[str, str]) -> None:
    """Compare hashes computed on this node with the deployed ones; say what differs."""
    spec = training_spec(config)
    expected = {"model_config_hash": spec.model_config_hash, "dataset_root": spec.dataset_root,
                "profile_hash": spec.profile_hash, "genesis_model_hash": config.genesis_model_hash}
    missing = [k for k, v in expected.items() if v is None]
    if missing:
        raise ConfigError(f"deployment's run config lacks {', '.join(missing)}; redeploy with `veritrain deploy`")
    for key, want in expected.items():
        if local[key] != want:
            cause = "this node's model, corpus or replay profile is not the run's"
            if key == "genesis_model_hash" and spec.genesis is not None:
                cause = f"this node's copy of the genesis checkpoint {spec.genesis.path} is not the run's"
            raise ConfigError(f"local {key.replace('_', ' ')} {local[key][:16]}… differs from the deployed "
                              f"{str(want)[:16]}…; {cause}")
