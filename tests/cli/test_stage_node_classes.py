"""The class set a node registers in a staged run (protocol/cli/node_setup.py `node_classes`): a miner's
class on its stage, a validator's class on every stage that permits it; an unstaged run as before.
No chain, no torch: the run's profile is asked for, so the machine is not probed."""

from __future__ import annotations

from dataclasses import asdict
from types import SimpleNamespace

import pytest

from protocol.chain.deployment import ContractAddresses, Deployment, save_deployment
from protocol.cli.node_setup import node_classes, register_classes
from protocol.config.run_config import RunConfig
from protocol.config.run_setup import training_spec
from protocol.core.errors import ConfigError
from protocol.core.hardware.hardware_class import ClassNotPermitted

ADDR = "0x" + "11" * 20
CLASSES = [asdict(c) for c in training_spec(RunConfig()).classes]  # 1t avx2 (the profile), 2t avx2, 1t avx512


def _deployment(tmp_path, **training):
    contracts = ContractAddresses(**{name: ADDR for name in ContractAddresses.model_fields})
    config = RunConfig(training={"preset": "micro", **training})
    dep = Deployment(chain_id=31337, deploy_block=0, deployer=ADDR, contracts=contracts, run_config=config,
                     run_config_hash="00", sources_hash="00")
    save_deployment(dep, tmp_path / "deployment.json")
    return tmp_path / "deployment.json"


def test_an_unstaged_run_registers_its_class_as_before_and_takes_no_stage(tmp_path):
    path = _deployment(tmp_path)
    mask, chosen = node_classes(path, None)
    assert mask == 1 and chosen == training_spec(RunConfig()).profile
    with pytest.raises(ConfigError, match="no stages"):
        node_classes(path, None, stage=0)


def test_a_stage_miner_registers_one_bit_and_a_validator_every_stage_of_its_class(tmp_path):
    # stage 0 permits the 2t class alone, stage 1 all three: pairs (2t, 0), (1t, 1), (2t, 1), (avx512, 1)
    path = _deployment(tmp_path, stages=2, stage_classes=[CLASSES[1:2], CLASSES])
    assert node_classes(path, None, stage=1)[0] == 1 << 1
    assert node_classes(path, None)[0] == 1 << 1  # the 1t class is permitted on stage 1 alone
    with pytest.raises(ClassNotPermitted, match="not permitted for stage 0"):
        node_classes(path, None, stage=0)


def test_a_staged_accounts_fixed_set_is_named_with_its_stage(tmp_path):
    config = RunConfig(training={"preset": "micro", "stages": 2})
    staking = SimpleNamespace(hardware_classes=lambda _a: 1 << 4, classes_fixed=lambda _a: True)  # (2t, 1)
    client = SimpleNamespace(address=ADDR, read=SimpleNamespace(staking=staking),
                             deployment=SimpleNamespace(run_config=config))
    with pytest.raises(ConfigError, match="hardware class cpu/avx2/2t/float32 on stage 1, fixed"):
        register_classes(client, 1)
