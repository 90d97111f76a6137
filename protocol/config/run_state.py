"""What the run config's `[training]` section becomes with torch: the corpus, genesis θ and the
hashes `veritrain deploy` pins.

`run_setup.py` reads the section into typed specs without torch (the chain, the explorer and
`veritrain inspect`/`claim` load it); the functions here build tensors from them and run in
the node's workers (`pinned_hashes` under the run's profile, by
`protocol.node.pinning.prepare`).
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from protocol.config.run_config import RunConfig
from protocol.config.run_setup import (
    DatasetSpec,
    Setup,
    TrainingSpec,
    check_genesis_present,
    check_vocabulary,
)
from protocol.core.errors import ConfigError


@functools.lru_cache(maxsize=2)
def load_dataset(spec: DatasetSpec) -> Any:
    """Load (once per process) the corpus a spec names."""
    from protocol.config import corpus

    kw = {"page_tokens": spec.page_tokens, "heldout_every": spec.heldout_every}
    if spec.source == "stdlib":
        return corpus.from_stdlib(**kw)
    if spec.path is None:
        raise ConfigError(f"[training.dataset] source {spec.source!r} needs a path")
    if not Path(spec.path).exists():
        raise ConfigError(f"dataset path {spec.path} does not exist")
    if spec.source == "folder":
        return corpus.from_folder(Path(spec.path), "**/*", **kw)
    if spec.source == "packed":  # PackedCorpusMismatch (a ConfigError) when the tokenizer differs
        return corpus.from_packed(Path(spec.path), spec.tokenizer_hash, spec.vocab_size, **kw)
    return corpus.from_bin(Path(spec.path), **kw)


def pinned_hashes(spec: TrainingSpec) -> dict[str, str]:
    """Model config hash, dataset root, profile hash and genesis model hash, computed
    here (run it in a worker under the profile: genesis init must match everyone's). The
    genesis checkpoint, if any, is read first: a missing or wrong one fails before the corpus loads."""
    from protocol.core.hardware.replay_profile import profile_hash
    from protocol.core.model.gpt import config_hash
    from protocol.core.pipeline.staged_bundle import encoded_model

    setup = Setup(spec, b"")
    model = setup.model
    genesis_hash = encoded_model(genesis(spec), model, setup.stage_split)[1].hex()
    dataset = load_dataset(spec.dataset)
    check_vocabulary(model.vocab_size, dataset.vocab_size, spec.dataset)
    return {
        "model_config_hash": config_hash(model).hex(),
        "dataset_root": dataset.root.hex(),
        "profile_hash": profile_hash(setup.profile).hex(),
        "genesis_model_hash": genesis_hash,
    }


def with_packed_facts(spec: TrainingSpec) -> TrainingSpec:
    """A packed dataset's tokenizer hash and vocabulary size, read from its sidecar into the spec
    (deploy pins them, so they are in the run config and its hash)."""
    if spec.dataset.source != "packed" or spec.dataset.path is None:
        return spec
    from protocol.config.corpus import read_packed_meta

    meta = read_packed_meta(Path(spec.dataset.path))
    dataset = spec.dataset.model_copy(update={"tokenizer_hash": spec.dataset.tokenizer_hash or meta.tokenizer_hash,
                                              "vocab_size": spec.dataset.vocab_size or meta.vocab_size})
    return spec.model_copy(update={"dataset": dataset})


def genesis(spec: TrainingSpec) -> Any:
    """Round 0's global state: the `[training.genesis]` checkpoint's θ (its config.json must
    give the run's model), else `init_params` seeded by `init_seed`."""
    from protocol.core.aggregation.state import genesis_state

    setup = Setup(spec, b"")
    params = None
    if spec.genesis is not None:
        from protocol.config.hf_checkpoint import load_genesis

        check_genesis_present(spec)
        params = load_genesis(Path(spec.genesis.path), setup.model)
    return genesis_state(setup.model, setup.compute, spec.init_seed, params)


def hf_genesis_tables(folder: Path, model: dict[str, Any]) -> dict[str, Any]:
    """`[training.model]` (the checkpoint's whole config) and `[training.genesis]` for a run that
    starts from the Hugging Face Llama checkpoint in `folder` (made absolute: every node reads
    it there). `model`, the run config's own table, may set `block_size` (a shorter training
    context); any other key it sets must agree with the checkpoint."""
    from protocol.config.hf_checkpoint import genesis_model

    folder = folder.expanduser().resolve()
    full = genesis_model(folder, model.get("block_size"))
    clash = sorted(k for k in model if k in full and model[k] != full[k])
    if clash:
        detail = ", ".join(f"{k} = {model[k]!r} (checkpoint: {full[k]!r})" for k in clash)
        raise ConfigError(f"[training.model] disagrees with the genesis checkpoint {folder}: {detail}")
    return {"model": {**model, **full}, "genesis": {"path": str(folder), "format": "hf-llama"}}


def with_hf_genesis(config: RunConfig, folder: Path) -> RunConfig:
    """`config` training from the checkpoint in `folder` (`veritrain deploy --genesis`)."""
    tables = hf_genesis_tables(folder, dict(config.training.get("model", {})))
    return config.model_copy(update={"training": {**config.training, **tables}})
