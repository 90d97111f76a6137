"""Regression tests for contract defects found while writing this suite (they were strict xfails
until the contracts were fixed): each test states the intended behaviour."""

import boa
from conftest import (
    KIND_REPLAY,
    KIND_UNAVAILABLE,
    MULTIADDR,
    NODE_KEY,
    SIG,
    STATUS_VOID,
    TOKEN,
    VALIDATOR,
    World,
    deploy_stack,
    join,
    make_world,
)


def test_voided_report_does_not_shield_the_miner_from_an_honest_report(world: World):
    """A colluding validator files a bogus `unavailable` report first; the miner serves, so it is
    void and the colluder gets its bond back for free. The honest validator, who found a real replay
    mismatch, must still be able to report the same miner in the same round."""
    d = world.d
    colluder, honest = world.validators[1], world.validators[0]
    m = world.miners[0]
    world.to_scoring(0)
    rid = d.report_fraud(0, m, KIND_UNAVAILABLE, 0, b"\x01" * 32, SIG, sender=colluder)
    d.vote_fraud(rid, 3, sender=honest)  # served: the checkpoint was available
    assert d.resolve_fraud(rid) == STATUS_VOID
    assert world.s.reporting_open(0)
    rid2 = d.report_fraud(0, m, KIND_REPLAY, 4, b"\x02" * 32, SIG, sender=honest)
    assert rid2 == rid + 1 and d.report_of(0, m, honest) == rid2 and d.report_of(0, m, colluder) == rid


def test_unstaked_validator_registrations_cannot_lock_out_real_validators():
    """`register` is free; it used to append every new validator to a 256-entry array that never
    shrank, so 256 throwaway accounts blocked every later validator. Only staked validators are listed."""
    stack = deploy_stack()
    for _ in range(256):
        stack.staking.register(VALIDATOR, NODE_KEY, MULTIADDR, SIG, sender=boa.env.generate_address())
    assert stack.staking.validator_count() == 0
    real = join(stack, VALIDATOR, 500 * TOKEN)
    assert stack.staking.validators(0) == real


def test_findings_setup_is_sound():
    """The same actions succeed below the limits (the fixtures are sound)."""
    w = make_world(n_miners=2)
    w.to_scoring(0)
    assert w.d.report_fraud(0, w.miners[0], KIND_REPLAY, 0, b"\x01" * 32, SIG, sender=w.validators[0]) == 1
    stack = deploy_stack()
    for _ in range(10):
        stack.staking.register(VALIDATOR, NODE_KEY, MULTIADDR, SIG, sender=boa.env.generate_address())
    real = join(stack, VALIDATOR, 500 * TOKEN)
    assert stack.staking.validators(0) == real
