"""The honest miner's path never passes through the cheats (issue 12): a miner started
without `--cheat` trains, commits and serves without importing protocol.devnet.cheats, and
a cheat handed to it replaces the honest submission in the worker."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

# runs in a fresh interpreter: this test process has imported the cheats already
PRODUCE = textwrap.dedent("""
    import sys, tempfile, pathlib
    import protocol.cli.app, protocol.cli.node, miner.node, validator.node  # the production entry points
    from protocol.cli.node_setup import miner_cheat as _cheat
    from protocol.config.run_setup import TrainingSpec
    from miner.work import MinerJob, produce
    from protocol.node.global_model import genesis_blob

    assert _cheat(None) is None
    tmp = pathlib.Path(tempfile.mkdtemp())
    (tmp / "corpus").mkdir()
    (tmp / "corpus" / "a.txt").write_bytes(bytes(range(256)) * 400)
    spec = TrainingSpec.model_validate({
        "preset": "micro",
        "dataset": {"source": "folder", "path": str(tmp / "corpus"), "page_tokens": 1024, "heldout_every": 10},
        "compute": {"inner_steps": 2, "checkpoint_every": 1, "batch_size": 2, "pages_per_miner": 2}})
    blob, state_hash = genesis_blob(spec)
    (tmp / "blobs").mkdir()
    cheat = None
    if sys.argv[1] != "honest":
        from protocol.devnet.cheats import MinerCheat
        cheat = MinerCheat(sys.argv[1])
    job = MinerJob(spec, b"seed", 0, "0x" + "ab" * 20, blob, state_hash, None, 1, "0x" + "cd" * 20,
                   cheat=cheat, blob_dir=str(tmp / "blobs"))
    out = produce(job)
    print("checkpoints", sum(c is not None for c in out.checkpoints), "withheld", out.withheld)
    print("cheats imported", "protocol.devnet.cheats" in sys.modules)
""")


def _produce(kind: str) -> str:
    done = subprocess.run([sys.executable, "-c", PRODUCE, kind], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_an_honest_miner_trains_without_importing_the_cheats() -> None:
    out = _produce("honest")
    assert "checkpoints 3 withheld []" in out
    assert "cheats imported False" in out


def test_a_cheat_handed_to_the_miner_replaces_its_submission() -> None:
    out = _produce("withhold")
    assert "cheats imported True" in out
    assert "withheld []" not in out  # the withholding cheat refuses to serve faked leaves


def test_the_cli_refuses_an_unknown_cheat() -> None:
    from protocol.cli.node_setup import miner_cheat as _cheat
    from protocol.core.errors import ConfigError

    with pytest.raises(ConfigError, match="unknown cheat"):
        _cheat("teleport")
