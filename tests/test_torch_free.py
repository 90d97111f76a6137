"""Torch loads only where tensors are (docs/ARCHITECTURE.md §1): the chain client, the explorer, the p2p
node, `veritrain inspect` and `veritrain claim` import no torch, so they start in a fraction of
the time. Each check runs in a fresh interpreter and asserts on its `sys.modules`; the static
side is the import-linter contract "no torch in the chain, ..." (tests/test_layers.py)."""

from __future__ import annotations

import dataclasses
import importlib.metadata
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from protocol.config.run_config import RunConfig
from protocol.core.hardware.replay_profile import ReplayProfile, installed_torch_version
from protocol.core.model.config import PRESETS, LlamaConfig, layout, layout_size
from protocol.core.model.gpt import build_model, num_params, param_shapes

REPO = Path(__file__).resolve().parents[1]


def loads_torch(code: str) -> bool:
    """Whether running `code` in a fresh interpreter leaves torch in its sys.modules."""
    probe = code + "\nimport sys\nprint('TORCH' if 'torch' in sys.modules else 'NO-TORCH')"
    done = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1] == "TORCH"


def test_the_chain_explorer_and_p2p_node_import_no_torch() -> None:
    assert loads_torch("import protocol.core.model.gpt")  # the probe sees torch where it is
    assert not loads_torch("import protocol.chain.client, protocol.explorer.server, protocol.p2p.node, "
                           "protocol.chain.deploy, protocol.chain.claims, protocol.chain.settlement_view")


def test_the_inspect_and_claim_commands_import_no_torch() -> None:
    """The modules behind `veritrain inspect` and `veritrain claim`, and the commands themselves
    run to their first error (no deployment file) through the CLI's own entry point."""
    assert not loads_torch("import protocol.cli.app, protocol.cli.account, protocol.cli.inspect_render")
    for argv in (["inspect", "summary", "--deployment", "/nonexistent.json"],
                 ["claim", "--deployment", "/nonexistent.json", "--keys", "/nonexistent.key"]):
        code = ("from protocol.cli.app import app\nfrom protocol.cli.usage import run\n"
                f"assert run(app, {argv!r}) != 0")
        assert not loads_torch(code), argv


def test_a_deployment_and_its_blob_caps_need_no_torch(tmp_path: Path) -> None:
    """Loading a deployment file written before caps were recorded works out its caps from the run
    config (model layout, compute config) without loading torch."""
    from protocol.chain.deployment import Deployment, save_deployment

    zero = "0x" + "00" * 20
    contracts = {k: zero for k in ("token", "staking", "keys", "rounds", "scores", "rewards", "results",
                                   "column_challenges", "tree_challenges", "account_challenges", "claims_challenges", "disputes")}
    dep = Deployment(chain_id=31337, deploy_block=0, deployer=zero, contracts=contracts, run_config=RunConfig(),
                     run_config_hash="00", sources_hash="00")
    save_deployment(dep, tmp_path / "deployment.json")
    code = ("from pathlib import Path\nfrom protocol.chain.deployment import load_deployment\n"
            f"print(load_deployment(Path({str(tmp_path / 'deployment.json')!r})).resolved_blob_caps().model_dump_json())")
    assert not loads_torch(code)
    caps = json.loads(subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                                     timeout=120, check=True).stdout)
    assert caps == dep.resolved_blob_caps().model_dump()  # the same caps in this (torch) process


VARIANTS = [*PRESETS.values(), dataclasses.replace(PRESETS["micro"], bias=False),
            dataclasses.replace(PRESETS["llama-micro"], tie_embeddings=True),
            LlamaConfig(n_layer=1, n_head=4, n_embd=32, block_size=8, intermediate_size=40)]


@pytest.mark.parametrize("cfg", VARIANTS, ids=lambda c: f"{type(c).__name__}-{c.n_layer}x{c.n_embd}")
def test_the_torch_free_layout_is_the_built_models(cfg: object) -> None:
    """`layout` (names, shapes, order) is exactly what the model built by torch lists, and what
    `param_shapes` (which validates every tensor a peer sends) expects."""
    built = [(name, tuple(p.shape)) for name, p in build_model(cfg).named_parameters()]  # type: ignore[arg-type]
    assert list(layout(cfg).items()) == built == list(param_shapes(cfg).items())  # type: ignore[arg-type]
    assert layout_size(cfg) == num_params(cfg)  # type: ignore[arg-type]


def test_the_torch_version_read_without_torch_is_torchs_own() -> None:
    """Profiles (and so class ids) default to the installed build read from package metadata:
    the same string torch reports, so deploy pins what every worker observes."""
    assert installed_torch_version() == importlib.metadata.version("torch") == torch.__version__
    assert ReplayProfile().torch_version == torch.__version__
