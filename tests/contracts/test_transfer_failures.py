"""The "transfer failed" reverts, reached with a token that returns false instead of reverting."""

from pathlib import Path

import boa
import pytest
from conftest import (
    MINER,
    MULTIADDR,
    NODE_KEY,
    SIG,
    TOKEN,
    VALIDATOR,
    Params,
    World,
    deploy_stack,
    register_key,
)

FALSE_TOKEN = Path(__file__).parent / "mocks" / "FalseToken.vy"


def make_false_world(keys: bool = False) -> World:
    p = Params()
    token = boa.load(str(FALSE_TOKEN))
    stack = deploy_stack(p, token=token)
    staking, settlement = stack.staking, stack.settlement
    accounts = []
    for role, amount in [(MINER, 100), (MINER, 100), (VALIDATOR, 300), (VALIDATOR, 200)]:
        a = boa.env.generate_address()
        token.mint(a, (amount + 100) * TOKEN)
        staking.register(role, NODE_KEY, MULTIADDR, SIG, sender=a)
        staking.stake(amount * TOKEN, sender=a)
        accounts.append(a)
    world = World(stack, accounts[:2], accounts[2:])
    if keys:  # before the start: the round's aggregate key is cached when it opens
        for i, v in enumerate(world.validators):
            register_key(world, v, i)
    settlement.start()
    return world


@pytest.fixture
def false_world() -> World:
    return make_false_world()


def test_stake_and_withdraw_report_failed_transfers(false_world: World):
    w = false_world
    m = w.miners[0]
    w.t.set_failing(True)
    with boa.reverts("staking: transfer failed"):
        w.st.stake(TOKEN, sender=m)
    w.st.request_unbond(10 * TOKEN, sender=m)
    boa.env.time_travel(seconds=w.stack.params.unbonding_delay)
    with boa.reverts("staking: transfer failed"):
        w.st.withdraw(sender=m)
    w.t.set_failing(False)
    w.st.withdraw(sender=m)
    assert w.t.balanceOf(m) == 110 * TOKEN


def test_slash_reports_failed_reporter_payment(false_world: World):
    w = false_world
    w.t.set_failing(True)
    with boa.reverts("staking: transfer failed"):
        w.st.slash(w.miners[0], 5000, w.validators[0], 2000, sender=w.d.address)


def test_claim_reports_failed_transfer():
    w = make_false_world(keys=True)
    v0, v1 = w.validators
    w.run_round(0, {v0: [5, 5], v1: [5, 5]})
    w.t.set_failing(True)
    with boa.reverts("settlement: transfer failed"):
        w.claim(v0, 0)
    assert w.s.claimed(v0) == 0
    w.t.set_failing(False)
    assert w.claim(v0, 0) == w.settled[0].claim_of(str(v0)).amount > 0


def test_bond_transfers_report_failure(false_world: World):
    w = false_world
    v0 = w.validators[0]
    w.to_scoring(0)
    w.t.set_failing(True)
    with boa.reverts("disputes: bond transfer failed"):
        w.d.report_fraud(0, w.miners[0], 1, 0, b"\x01" * 32, SIG, sender=v0)
    w.t.set_failing(False)
    rid = w.d.report_fraud(0, w.miners[0], 1, 0, b"\x01" * 32, SIG, sender=v0)
    boa.env.time_travel(seconds=w.stack.params.challenge_window)
    w.t.set_failing(True)
    with boa.reverts("disputes: bond transfer failed"):  # returning the bond of a void report
        w.d.resolve_fraud(rid)
