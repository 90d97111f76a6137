"""No node-local setting changes θ_{r+1}, the attested held-out loss or a result root (DESIGN §4:
a consensus parameter lives in the hashed run config). Every `NodeConfig` field, found by
walking the dataclass and varied one at a time, leaves all three as they were; the run config's
consensus parameters change them, so the check would see a value that leaked into the node.

θ_{r+1} is computed by `NodeContext.compute_next` itself, on a context whose chain reads are a
fixed round (three miners' honest updates and three validators' reveals) and whose worker runs
in this process. The context's `setup` is built from the node's config as `NodeContext` builds
it (the run's, in the node's hardware class)."""

from __future__ import annotations

import dataclasses
import sysconfig
import types
import typing
from pathlib import Path
from typing import Any

import fixtures_training as ft  # loaded by tests/conftest.py
import pytest
import trio

from protocol.config.corpus import from_folder
from protocol.config.run_config import RunConfig
from protocol.config.run_setup import DatasetSpec, Setup, TrainingSpec
from protocol.core.aggregation.state import decode_state
from protocol.core.crypto.keccak import checksum_address
from protocol.core.hardware.replay_profile import ReplayProfile
from protocol.core.proof.commitment import Commit
from protocol.core.proof.envelope import encode_envelope
from protocol.core.proof.submission import honest
from protocol.core.settlement.loss_scale import fixed_loss
from protocol.core.settlement.result import compute_result
from protocol.core.settlement.result_header import build_result
from protocol.core.settlement.result_inputs import Reveal, RoundInputs
from protocol.core.train.training import RoundTask
from protocol.node.context import NodeContext
from protocol.node.global_model import genesis_blob, state_heldout_loss
from protocol.node.node_config import NodeConfig

RUN_SEED = b"\x07" * 32
CONTRACT = "0x" + "cc" * 20
MINERS = tuple(checksum_address("0x" + c * 40) for c in "abd")
VALIDATORS = tuple(checksum_address("0x" + c * 40) for c in "123")
SCORES = (900, 600, 300)  # every validator's reveal: all three miners aggregated by default


@pytest.fixture(scope="module")
def profile() -> ReplayProfile:
    return ft.apply_test_profile()


@pytest.fixture(scope="module")
def corpus_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("corpus")
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    for name in ("argparse.py", "typing.py", "dataclasses.py"):
        (folder / f"{name}.txt").write_bytes((stdlib / name).read_bytes())
    return folder


def spec_of(folder: Path, profile: ReplayProfile, **consensus: Any) -> TrainingSpec:
    return TrainingSpec(preset="micro", profile=profile, **consensus,
                        dataset=DatasetSpec(source="folder", path=str(folder), page_tokens=1024, heldout_every=4),
                        compute={"inner_steps": 6, "checkpoint_every": 2, "batch_size": 4, "pages_per_miner": 2})


@pytest.fixture(scope="module")
def round_1(corpus_dir: Path, profile: ReplayProfile) -> dict[str, bytes]:
    """Each miner's envelope of round 1, trained honestly from genesis."""
    spec = spec_of(corpus_dir, profile)
    blob, state_hash = genesis_blob(spec)
    setup = Setup(spec, RUN_SEED)
    theta = decode_state(blob, setup.model, state_hash).params
    ds = from_folder(corpus_dir, "**/*", page_tokens=1024, heldout_every=4)  # the spec's corpus
    envelopes = {}
    for miner in MINERS:
        task = RoundTask(RUN_SEED, 1, bytes.fromhex(miner[2:]), setup.model, setup.compute)
        sub = honest(task, ds, theta, None)
        envelopes[miner] = encode_envelope(1, CONTRACT, 1, miner, sub.trace, sub.blob)
    return envelopes


def round_inputs(loss: int) -> RoundInputs:
    reveals = {v: Reveal(SCORES, loss, bytes(32)) for v in VALIDATORS}
    return RoundInputs(1, MINERS, VALIDATORS, (1, 1, 1), reveals, frozenset(), {}, 1000, 7000)


def context(spec: TrainingSpec, config: NodeConfig, envelopes: dict[str, bytes]) -> types.SimpleNamespace:
    """A node at the end of round 1, reading its chain facts from `round_inputs`."""
    setup = Setup(spec, RUN_SEED)
    if config.hardware_class is not None:  # as NodeContext.__init__
        setup = setup.in_class(config.hardware_class)
    hashes = {m: bytes([i + 1]) * 32 for i, m in enumerate(MINERS)}

    async def state_for(round_: int) -> tuple[bytes, bytes]:
        return genesis_blob(setup.spec)

    async def consensus(round_: int) -> dict[str, int]:
        inputs = round_inputs(0)
        return dict(zip(inputs.miners, compute_result(inputs).consensus, strict=True))

    async def commits(round_: int) -> dict[str, Commit]:
        return {m: Commit(hashes[m], bytes(32), i, 0) for i, m in enumerate(MINERS)}

    async def fetch_blob(blob_hash: bytes, kind: Any, first: str | None = None) -> bytes:
        return envelopes[first] if first is not None and hashes[first] == blob_hash else b""

    async def work(fn: Any, *args: Any) -> Any:  # the profile worker, in this process
        return fn(*args)

    return types.SimpleNamespace(config=config, setup=setup, caps=types.SimpleNamespace(update=1 << 26),
                                 state_for=state_for, consensus=consensus, commits=commits,
                                 fetch_blob=fetch_blob, _work=work)


def outcome(spec: TrainingSpec, config: NodeConfig, envelopes: dict[str, bytes]) -> tuple[bytes, int, bytes]:
    """(θ_2's model hash, the held-out loss a validator reveals for θ_1, round 1's result root)."""
    ctx = context(spec, config, envelopes)
    _, model_hash = trio.run(NodeContext.compute_next, ctx, 1)  # type: ignore[arg-type]
    loss = fixed_loss(state_heldout_loss(ctx.setup.spec, ctx.setup.run_seed, *genesis_blob(ctx.setup.spec)))
    run_config_hash = RunConfig(training=spec.model_dump(mode="json")).config_hash()
    root = build_result(round_inputs(loss), 31337, CONTRACT, run_config_hash, model_hash).header.result_root()
    return model_hash, loss, root


def other_value(name: str, hint: Any, default: Any, spec: TrainingSpec) -> Any:
    """A value of type `hint` unlike `default`, chosen to matter if the field were used (an int
    becomes 1: a top-G of one would drop two of the three updates)."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        inner = [a for a in typing.get_args(hint) if a is not type(None)]
        return other_value(name, inner[0], default, spec)
    if typing.get_origin(hint) is tuple:
        args = typing.get_args(hint)
        return tuple(other_value(name, a, None, spec) for a in (args[:1] if args[-1] is Ellipsis else args))
    if typing.get_origin(hint) is dict:
        return {"other": 1}
    chosen: dict[Any, Any] = {
        bool: lambda: not default,
        int: lambda: 1 if default != 1 else 2,
        float: lambda: default * 2 if default else 1.0,
        str: lambda: (default or "") + "-other",
        Path: lambda: Path("/elsewhere"),
        ReplayProfile: lambda: next(c for c in spec.classes if c != spec.profile),
    }
    if hint not in chosen:
        pytest.fail(f"NodeConfig.{name} has type {hint}, which this test cannot vary yet: teach `other_value`")
    return chosen[hint]()


def test_no_node_config_field_changes_the_model_the_loss_or_the_root(corpus_dir, profile, round_1):
    spec = spec_of(corpus_dir, profile)
    base = NodeConfig(data_dir=Path("/data"))
    want = outcome(spec, base, round_1)
    hints = typing.get_type_hints(NodeConfig)
    for field in dataclasses.fields(NodeConfig):
        value = other_value(field.name, hints[field.name], getattr(base, field.name), spec)
        assert value != getattr(base, field.name), field.name
        config = dataclasses.replace(base, **{field.name: value})
        assert outcome(spec, config, round_1) == want, f"NodeConfig.{field.name} changed a consensus result"


def test_the_run_configs_consensus_parameters_do_change_them(corpus_dir, profile, round_1):
    """The same check sees a consensus value: a smaller top-G gives another θ_2, fewer
    held-out batches another revealed loss, and each another result root."""
    base = NodeConfig(data_dir=Path("/data"))
    model, loss, root = outcome(spec_of(corpus_dir, profile), base, round_1)
    top_1 = outcome(spec_of(corpus_dir, profile, top_g=1), base, round_1)
    assert top_1[0] != model and top_1[1] == loss and top_1[2] != root
    fewer = outcome(spec_of(corpus_dir, profile, heldout_batches=2), base, round_1)
    assert fewer[0] == model and fewer[1] != loss and fewer[2] != root
