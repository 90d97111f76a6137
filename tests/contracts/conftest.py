"""titanoboa fixtures: the four contracts wired as `veritrain deploy` wires them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import boa
import pytest
from eth_abi import encode as abi_encode
from eth_utils import keccak

CONTRACTS = Path(__file__).resolve().parents[2] / "contracts"
SCORE_DOMAIN = keccak(b"veritrain/scores/v1")

MINER, VALIDATOR = 1, 2
TOKEN = 10**18


@dataclass(frozen=True)
class Params:
    min_miner_stake: int = 100 * TOKEN
    min_validator_stake: int = 200 * TOKEN
    max_permits: int = 8
    commit_duration: int = 60
    score_duration: int = 60
    reveal_duration: int = 60
    challenge_window: int = 60
    unbonding_delay: int = 600
    emission: int = 1000 * TOKEN
    miner_share_bps: int = 7000
    report_bond: int = 10 * TOKEN
    slash_bps: int = 5000
    reporter_share_bps: int = 2000


@dataclass
class Stack:
    token: object
    staking: object
    settlement: object
    disputes: object
    deployer: str
    params: Params
    genesis: int


def deploy_stack(params: Params = Params(), holders: list[str] | None = None, amount: int = 10**6 * TOKEN) -> Stack:
    deployer = boa.env.eoa
    holders = holders or [deployer]
    token = boa.load(str(CONTRACTS / "Token.vy"), holders, [amount] * len(holders))
    staking = boa.load(
        str(CONTRACTS / "Staking.vy"), token.address, params.min_miner_stake, params.min_validator_stake,
        params.max_permits, params.unbonding_delay,
    )
    settlement = boa.load(
        str(CONTRACTS / "Settlement.vy"), token.address, staking.address, b"\x11" * 32, b"\x22" * 32,
        params.commit_duration, params.score_duration, params.reveal_duration, params.emission,
        params.miner_share_bps,
    )
    disputes = boa.load(
        str(CONTRACTS / "Disputes.vy"), token.address, staking.address, settlement.address,
        params.report_bond, params.challenge_window, params.slash_bps, params.reporter_share_bps,
    )
    staking.wire(settlement.address, disputes.address)
    settlement.set_disputes(disputes.address)
    token.set_minter(settlement.address, True)
    token.renounce_ownership()
    return Stack(token, staking, settlement, disputes, deployer, params, amount * len(holders))


def score_commitment(chain_id: int, settlement: str, validator: str, rnd: int, miners, scores, salt: bytes) -> bytes:
    encoded = abi_encode(
        ["bytes32", "uint256", "address", "address", "uint256", "address[]", "uint16[]", "bytes32"],
        [SCORE_DOMAIN, chain_id, settlement, validator, rnd, list(miners), list(scores), salt],
    )
    return keccak(encoded)


def join(stack: Stack, role: int, stake: int, funds: int | None = None) -> str:
    account = boa.env.generate_address()
    stack.token.transfer(account, funds if funds is not None else stake + 100 * TOKEN, sender=stack.deployer)
    with boa.env.prank(account):
        stack.staking.register(role, b"\x01" * 32, "/ip4/127.0.0.1/tcp/4001", b"\x02" * 64)
        stack.token.approve(stack.staking.address, 2**256 - 1)
        stack.token.approve(stack.disputes.address, 2**256 - 1)
        if stake:
            stack.staking.stake(stake)
    return account


@pytest.fixture
def stack() -> Stack:
    return deploy_stack()
