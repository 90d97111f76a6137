"""From the run config's `[training]` section to the objects nodes compute with.

`veritrain deploy` calls `prepare` to pin the hashes every node must reproduce (model
config, dataset root, replay profile, genesis global state); nodes call `check_local`
and refuse to run on any difference, with an error that says what differs.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from protocol.config.run_config import RunConfig
from protocol.core.errors import ConfigError

if TYPE_CHECKING:
    from protocol.core.replay_profile import ProfileWorker


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class DatasetSpec(_Strict):
    source: Literal["stdlib", "folder", "bin"] = "stdlib"  # stdlib: this Python's own .py files
    path: str | None = None  # folder of text files, or a uint16 .bin
    page_tokens: int = Field(4096, gt=0)  # tokens per content-addressed page
    heldout_every: int = Field(20, ge=2)  # one page in this many is held out


class ProfileSpec(_Strict):
    threads: int = Field(1, ge=1)  # intra-op threads; part of bitwise replay
    cpu_capability: str = "avx2"  # ATEN_CPU_CAPABILITY; avx2 lets avx2 and avx512 hosts agree
    deterministic: bool = True  # torch.use_deterministic_algorithms
    dtype: str = "float32"


class TrainingSpec(_Strict):
    preset: str = "tiny"  # model preset (micro, tiny, small, gpt2)
    init_seed: int = 0  # seeds the genesis weights
    dataset: DatasetSpec = DatasetSpec()
    profile: ProfileSpec = ProfileSpec()
    compute: dict[str, float | int | bool] = Field(default_factory=dict)  # ComputeConfig overrides
    torch_version: str | None = None  # pinned by deploy: replay needs the exact build
    # pinned by `veritrain deploy`; nodes must reproduce them
    model_config_hash: str | None = None
    dataset_root: str | None = None
    profile_hash: str | None = None


@dataclass(frozen=True)
class Setup:
    spec: TrainingSpec
    run_seed: bytes

    @property
    def model(self) -> Any:
        from protocol.core.model import preset

        return preset(self.spec.preset)

    @property
    def compute(self) -> Any:
        from protocol.core.training import ComputeConfig

        known = {f.name for f in fields(ComputeConfig)}
        unknown = set(self.spec.compute) - known
        if unknown:
            raise ConfigError(f"[training.compute] has unknown keys: {sorted(unknown)}")
        return ComputeConfig(**self.spec.compute)  # type: ignore[arg-type]

    @property
    def profile(self) -> Any:
        from protocol.core.replay_profile import ReplayProfile

        p = self.spec.profile
        extra = {"torch_version": self.spec.torch_version} if self.spec.torch_version else {}
        return ReplayProfile(threads=p.threads, cpu_capability=p.cpu_capability, deterministic=p.deterministic,
                             dtype=p.dtype, **extra)


def training_spec(config: RunConfig) -> TrainingSpec:
    try:
        return TrainingSpec.model_validate(config.training)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise ConfigError(f"[training] {'.'.join(map(str, first['loc']))}: {first['msg']}") from exc


def resolve(config: RunConfig) -> Setup:
    from protocol.core.hashing import blake3_hash

    return Setup(training_spec(config), blake3_hash("run-seed", config.run_seed.to_bytes(8, "big")))


@functools.lru_cache(maxsize=2)
def load_dataset(spec: DatasetSpec) -> Any:
    """Load (once per process) the corpus a spec names."""
    from protocol.core import data

    kw = {"page_tokens": spec.page_tokens, "heldout_every": spec.heldout_every}
    if spec.source == "stdlib":
        return data.from_stdlib(**kw)
    if spec.path is None:
        raise ConfigError(f"[training.dataset] source {spec.source!r} needs a path")
    if not Path(spec.path).exists():
        raise ConfigError(f"dataset path {spec.path} does not exist")
    if spec.source == "folder":
        return data.from_folder(Path(spec.path), "**/*", **kw)
    return data.from_bin(Path(spec.path), **kw)


def pinned_hashes(spec: TrainingSpec) -> dict[str, str]:
    """Model config hash, dataset root, profile hash and genesis model hash, computed
    here (run it in a worker under the profile: genesis init must match everyone's)."""
    from protocol.core.aggregate import genesis_state, global_state_hash
    from protocol.core.model import config_hash
    from protocol.core.replay_profile import profile_hash

    setup = Setup(spec, b"")
    model = setup.model
    return {
        "model_config_hash": config_hash(model).hex(),
        "dataset_root": load_dataset(spec.dataset).root.hex(),
        "profile_hash": profile_hash(setup.profile).hex(),
        "genesis_model_hash": global_state_hash(genesis_state(model, setup.compute, spec.init_seed), model).hex(),
    }


def prepare(config: RunConfig, worker: ProfileWorker | None = None) -> RunConfig:
    """The run config with the hashes nodes must reproduce filled in (used by deploy),
    computed in `worker` if it runs the config's profile, else in a worker of its own."""
    import torch

    from protocol.core.replay_profile import ProfileWorker

    spec = training_spec(config)
    spec = spec.model_copy(update={"torch_version": spec.torch_version or torch.__version__})
    profile = Setup(spec, b"").profile
    if worker is not None and worker.profile == profile:
        pinned = worker.ready().call(pinned_hashes, spec)
    else:
        with ProfileWorker(profile) as own:
            pinned = own.call(pinned_hashes, spec)
    genesis = pinned.pop("genesis_model_hash")
    spec = spec.model_copy(update=pinned)
    return config.model_copy(update={"training": spec.model_dump(mode="json"), "genesis_model_hash": genesis})


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
            raise ConfigError(f"local {key.replace('_', ' ')} {local[key][:16]}… differs from the deployed "
                              f"{str(want)[:16]}…; this node's model, corpus or replay profile is not the run's")
