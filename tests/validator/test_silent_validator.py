"""A silent validator (`veritrain devnet --silent-validators`) sits out every settlement duty
and keeps no result shares from gossip, so it never aggregates or posts a certificate; a
validator without the hook does every duty. The skipped reveal, audit, votes and signature in
a running network are the devnet test's (tests/integration/test_devnet_capacity.py)."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import get_args

import pytest

from protocol.core.crypto.bls import bls_keygen
from protocol.core.crypto.signing import NodeIdentity
from protocol.core.wire.messages import ResultSigned, decode_gossip, make_gossip, to_hex
from protocol.devnet.silent_validator import SilentValidator
from protocol.node.keys import NodeKeys
from protocol.node.node_config import NodeConfig
from tests.node_context import DeployedChain, deployed_chain
from validator.node import ValidatorNode
from validator.silence import Duty, ValidatorSilence

ROOT = b"\xcd" * 32


@pytest.fixture(scope="module")
def chain() -> DeployedChain:
    return deployed_chain(accounts=2)


def _validator(chain: DeployedChain, data_dir: Path, silence: ValidatorSilence | None) -> ValidatorNode:
    account = chain.accounts.pop()
    keys = NodeKeys(account, NodeIdentity.generate(), bls_keygen(os.urandom(32)))
    return ValidatorNode(chain.deployer.with_account(account), keys, NodeConfig(data_dir=data_dir),
                         logging.getLogger("test.silent"), silence=silence)


def _share(node: ValidatorNode) -> None:
    """`node` hears another validator's signature share of round 0's result root."""
    sender = NodeIdentity.generate()
    body = ResultSigned(validator="0x" + "11" * 20, result_root=to_hex(ROOT), model_hash="0x" + "ab" * 32,
                        signature="0x" + "ef" * 96)
    contract = bytes.fromhex(node.client.results.address[2:])
    node.on_gossip(decode_gossip(make_gossip(sender, node.client.handle.chain_id, contract, 0, body)))


def test_a_silent_validator_skips_every_settlement_duty_and_keeps_no_shares(chain: DeployedChain,
                                                                             tmp_path: Path) -> None:
    node = _validator(chain, tmp_path, SilentValidator())
    assert all(node.skips(duty) for duty in get_args(Duty))
    _share(node)
    assert node.results.shares.of(0, ROOT) == {}


def test_a_validator_without_the_hook_does_every_duty_and_keeps_shares(chain: DeployedChain,
                                                                        tmp_path: Path) -> None:
    node = _validator(chain, tmp_path, None)
    assert not any(node.skips(duty) for duty in get_args(Duty))
    _share(node)
    assert node.results.shares.of(0, ROOT) == {"0x" + "11" * 20: bytes.fromhex("ef" * 96)}
