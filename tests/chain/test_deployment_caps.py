"""The deployment file records the per-kind blob caps; files written before them still load."""

from __future__ import annotations

import json

from protocol.chain.backend import connect, dev_account
from protocol.chain.deploy import deploy
from protocol.chain.deployment import load_deployment, run_blob_caps, save_deployment
from protocol.config.run_config import RunConfig
from protocol.core.model.gpt import preset
from protocol.core.train.compute_config import ComputeConfig
from protocol.core.wire.blob_caps import blob_caps

SMALL = RunConfig(training={"preset": "small", "compute": {"inner_steps": 12, "checkpoint_every": 3}})


def test_deploy_records_the_run_caps_and_they_survive_the_file(tmp_path):
    handle = connect(None)
    dep = deploy(handle, dev_account(handle), SMALL)
    want = blob_caps(preset("small"), ComputeConfig(inner_steps=12, checkpoint_every=3))
    assert dep.blob_caps == want and dep.blob_caps.checkpoint > 64 << 20
    save_deployment(dep, tmp_path / "d.json")
    assert json.loads((tmp_path / "d.json").read_text())["blob_caps"]["checkpoint"] == want.checkpoint
    assert load_deployment(tmp_path / "d.json") == dep


def test_a_file_without_caps_gets_the_ones_its_run_config_implies(tmp_path):
    handle = connect(None)
    dep = deploy(handle, dev_account(handle), SMALL)
    old = json.loads(dep.model_dump_json())
    del old["blob_caps"]  # as `veritrain deploy` wrote it before caps were recorded
    (tmp_path / "old.json").write_text(json.dumps(old))
    loaded = load_deployment(tmp_path / "old.json")
    assert loaded.blob_caps is None
    assert loaded.resolved_blob_caps() == run_blob_caps(SMALL) == dep.blob_caps
