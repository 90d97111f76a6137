"""Staking and registry: every function's happy path and every revert."""

import boa
from conftest import (
    MINER,
    MULTIADDR,
    NODE_KEY,
    SIG,
    TOKEN,
    VALIDATOR,
    Params,
    deploy_stack,
    join,
    last_logs,
    partial,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.core.settlement.result_inputs import MAX_VALIDATORS

ZERO = "0x" + "00" * 20


def fresh(stack):
    a = boa.env.generate_address()
    stack.token.transfer(a, 1000 * TOKEN, sender=stack.deployer)
    stack.token.approve(stack.staking.address, 2**256 - 1, sender=a)
    return a


# -- deploy and wiring ----------------------------------------------------------------------------


def test_constructor_rejects_bad_parameters():
    token = partial("Token").deploy([], [])
    with boa.reverts("staking: minimum stake must be positive"):
        partial("Staking").deploy(token.address, 0, 1, 1, 10, 1)
    with boa.reverts("staking: minimum stake must be positive"):
        partial("Staking").deploy(token.address, 1, 0, 1, 10, 1)
    with boa.reverts("staking: bad permit count"):
        partial("Staking").deploy(token.address, 1, 1, 0, 10, 1)
    with boa.reverts("staking: bad permit count"):
        partial("Staking").deploy(token.address, 1, 1, MAX_VALIDATORS + 1, 10, 1)
    s = partial("Staking").deploy(token.address, 1, 2, MAX_VALIDATORS, 10, 1)
    assert (s.min_miner_stake(), s.min_validator_stake(), s.max_permits(), s.unbonding_delay()) == (1, 2, MAX_VALIDATORS, 10)


def test_wire_once_by_owner_only():
    token = partial("Token").deploy([], [])
    s = partial("Staking").deploy(token.address, 1, 1, 1, 10, 1)
    a, b, c = (boa.env.generate_address() for _ in range(3))
    with boa.reverts("ownable: caller is not the owner"):
        s.wire(a, b, c, sender=a)
    for args in ((ZERO, b, c), (a, ZERO, c), (a, b, ZERO)):
        with boa.reverts("staking: zero address"):
            s.wire(*args)
    s.wire(a, b, c)
    assert [(e.disputes, e.results, e.keys) for e in last_logs(s, "Wired")] == [(a, b, c)]
    assert (s.disputes(), s.results(), s.keys(), s.owner()) == (a, b, c, ZERO)
    with boa.reverts("ownable: caller is not the owner"):
        s.wire(b, a, c)


# -- register -------------------------------------------------------------------------------------


def test_register_records_binding_and_emits_signature(stack):
    st_ = stack.staking
    a = boa.env.generate_address()
    st_.register(VALIDATOR, NODE_KEY, MULTIADDR, SIG, sender=a)
    (ev,) = last_logs(st_, "Registered")
    assert (ev.account, ev.role, ev.node_key, ev.multiaddr, ev.binding_sig) == (a, VALIDATOR, NODE_KEY, MULTIADDR, SIG)
    assert (st_.role(a), st_.node_key(a), st_.multiaddr(a)) == (VALIDATOR, NODE_KEY, MULTIADDR)
    assert st_.validator_count() == 0  # the validator list holds only staked validators
    # same role again updates the key and address
    st_.register(VALIDATOR, b"\x07" * 32, "/ip4/10.0.0.1/tcp/1", SIG, sender=a)
    assert (st_.node_key(a), st_.multiaddr(a), st_.validator_count()) == (b"\x07" * 32, "/ip4/10.0.0.1/tcp/1", 0)
    # node keys need not be unique (a squatter must not block a victim's key)
    b = boa.env.generate_address()
    st_.register(MINER, b"\x07" * 32, MULTIADDR, SIG, sender=b)
    assert st_.node_key(b) == st_.node_key(a)
    assert st_.validator_count() == 0


def test_register_reverts(stack):
    st_ = stack.staking
    a = boa.env.generate_address()
    for role in (0, 3):
        with boa.reverts("staking: unknown role"):
            st_.register(role, NODE_KEY, MULTIADDR, SIG, sender=a)
    with boa.reverts("staking: empty node key"):
        st_.register(MINER, b"\x00" * 32, MULTIADDR, SIG, sender=a)
    with boa.reverts("staking: binding signature must be 64 bytes"):
        st_.register(MINER, NODE_KEY, MULTIADDR, SIG[:63], sender=a)
    st_.register(MINER, NODE_KEY, MULTIADDR, SIG, sender=a)
    with boa.reverts("staking: role is fixed"):
        st_.register(VALIDATOR, NODE_KEY, MULTIADDR, SIG, sender=a)


# -- hardware classes -----------------------------------------------------------------------------


def test_a_miner_registers_one_class_and_a_validator_several(stack):
    st_ = stack.staking
    m, v = boa.env.generate_address(), boa.env.generate_address()
    st_.register(MINER, NODE_KEY, MULTIADDR, SIG, sender=m)
    st_.register(VALIDATOR, NODE_KEY, MULTIADDR, SIG, sender=v)
    assert (st_.hardware_classes(m), st_.hardware_classes(v)) == (0, 0)
    st_.set_hardware_classes(1 << 2, sender=m)
    st_.set_hardware_classes(0b1011, sender=v)
    assert [(e.account, e.classes) for e in last_logs(st_, "HardwareClassesSet")] == [(v, 0b1011)]
    assert (st_.hardware_classes(m), st_.hardware_classes(v)) == (4, 0b1011)
    st_.set_hardware_classes(1, sender=m)  # a miner moving to another machine re-registers
    st_.set_hardware_classes(1 << 15, sender=v)  # the 16th class is the last one
    assert (st_.hardware_classes(m), st_.hardware_classes(v)) == (1, 1 << 15)


def test_class_sets_that_are_empty_too_wide_or_two_for_a_miner_revert(stack):
    st_ = stack.staking
    m, v, nobody = (boa.env.generate_address() for _ in range(3))
    st_.register(MINER, NODE_KEY, MULTIADDR, SIG, sender=m)
    st_.register(VALIDATOR, NODE_KEY, MULTIADDR, SIG, sender=v)
    with boa.reverts("staking: not registered"):
        st_.set_hardware_classes(1, sender=nobody)
    for who in (m, v):
        for bad in (0, 1 << 16, 2**256 - 1):
            with boa.reverts("staking: classes outside the permitted list"):
                st_.set_hardware_classes(bad, sender=who)
    for two in (0b11, 0b101, (1 << 15) | 1):
        with boa.reverts("staking: a miner runs exactly one class"):
            st_.set_hardware_classes(two, sender=m)
    assert (st_.hardware_classes(m), st_.hardware_classes(v)) == (0, 0)


# -- stake / unbond / withdraw --------------------------------------------------------------------


def test_stake_moves_tokens_and_sets_eligibility(stack):
    st_, p = stack.staking, stack.params
    a = fresh(stack)
    st_.register(MINER, NODE_KEY, MULTIADDR, SIG, sender=a)
    st_.stake(p.min_miner_stake - 1, sender=a)
    assert not st_.is_eligible_miner(a)
    assert st_.eligible_miner_count() == 0
    st_.stake(1, sender=a)
    (ev,) = last_logs(st_, "Staked")
    assert (ev.account, ev.amount, ev.total) == (a, 1, p.min_miner_stake)
    assert st_.is_eligible_miner(a) and st_.eligible_role(a) == MINER
    assert st_.eligible_miner_count() == 1
    assert st_.staked(a) == st_.total_staked() == p.min_miner_stake
    assert stack.token.balanceOf(st_.address) == p.min_miner_stake
    assert stack.token.balanceOf(a) == 1000 * TOKEN - p.min_miner_stake
    st_.stake(5, sender=a)  # staying eligible does not double count
    assert st_.eligible_miner_count() == 1


def test_stake_reverts(stack):
    st_ = stack.staking
    a = fresh(stack)
    with boa.reverts("staking: not registered"):
        st_.stake(TOKEN, sender=a)
    st_.register(MINER, NODE_KEY, MULTIADDR, SIG, sender=a)
    with boa.reverts("staking: zero amount"):
        st_.stake(0, sender=a)
    with boa.reverts("erc20: transfer amount exceeds balance"):
        st_.stake(1001 * TOKEN, sender=a)
    stack.token.approve(st_.address, 0, sender=a)
    with boa.reverts("erc20: insufficient allowance"):
        st_.stake(TOKEN, sender=a)


def test_validator_eligibility_uses_validator_minimum(stack):
    p = stack.params
    v = join(stack, VALIDATOR, p.min_validator_stake - 1)
    assert stack.staking.eligible_role(v) == 0
    assert listed(stack) == []
    stack.staking.stake(1, sender=v)
    assert stack.staking.eligible_role(v) == VALIDATOR
    assert not stack.staking.is_eligible_miner(v)
    assert stack.staking.eligible_miner_count() == 0
    assert listed(stack) == [v]


def test_unbond_queues_stake_and_restarts_delay(stack):
    st_, p = stack.staking, stack.params
    m = join(stack, MINER, 150 * TOKEN)
    t0 = boa.env.timestamp
    st_.request_unbond(50 * TOKEN, sender=m)
    (ev,) = last_logs(st_, "UnbondRequested")
    assert (ev.account, ev.amount, ev.release_time) == (m, 50 * TOKEN, t0 + p.unbonding_delay)
    assert (st_.staked(m), st_.unbonding(m)) == (100 * TOKEN, 50 * TOKEN)
    assert (st_.total_staked(), st_.total_unbonding()) == (100 * TOKEN, 50 * TOKEN)
    assert st_.is_eligible_miner(m)
    boa.env.time_travel(seconds=100)
    st_.request_unbond(1, sender=m)  # below minimum now, and the whole queue waits again
    assert not st_.is_eligible_miner(m)
    assert st_.eligible_miner_count() == 0
    assert st_.unbond_release_time(m) == t0 + 100 + p.unbonding_delay
    boa.env.time_travel(seconds=p.unbonding_delay - 1)
    with boa.reverts("staking: still unbonding"):
        st_.withdraw(sender=m)
    boa.env.time_travel(seconds=1)
    before = stack.token.balanceOf(m)
    st_.withdraw(sender=m)
    (ev,) = last_logs(st_, "Withdrawn")
    assert (ev.account, ev.amount) == (m, 50 * TOKEN + 1)
    assert stack.token.balanceOf(m) == before + 50 * TOKEN + 1
    assert (st_.unbonding(m), st_.total_unbonding()) == (0, 0)
    assert stack.token.balanceOf(st_.address) == st_.total_staked() == 100 * TOKEN - 1
    with boa.reverts("staking: nothing to withdraw"):
        st_.withdraw(sender=m)


def test_unbond_reverts(stack):
    st_ = stack.staking
    m = join(stack, MINER, 100 * TOKEN)
    with boa.reverts("staking: zero amount"):
        st_.request_unbond(0, sender=m)
    with boa.reverts("staking: insufficient stake"):
        st_.request_unbond(100 * TOKEN + 1, sender=m)
    stranger = boa.env.generate_address()
    with boa.reverts("staking: insufficient stake"):
        st_.request_unbond(1, sender=stranger)


def test_withdraw_reverts_while_report_pending(stack):
    st_ = stack.staking
    m = join(stack, MINER, 100 * TOKEN)
    st_.request_unbond(10 * TOKEN, sender=m)
    boa.env.time_travel(seconds=stack.params.unbonding_delay)
    st_.report_opened(m, sender=stack.disputes.address)
    assert st_.open_reports(m) == 1
    with boa.reverts("staking: report pending"):
        st_.withdraw(sender=m)
    st_.report_closed(m, sender=stack.disputes.address)
    (ev,) = last_logs(st_, "ReportCountChanged")
    assert (ev.account, ev.open_reports) == (m, 0)
    st_.withdraw(sender=m)
    assert st_.unbonding(m) == 0


# -- disputes-only entry points -------------------------------------------------------------------


def test_only_disputes_guards(stack):
    st_ = stack.staking
    m = join(stack, MINER, 100 * TOKEN)
    for caller in (stack.deployer, m, stack.rounds.address, stack.column_challenges.address):
        with boa.reverts("staking: only disputes or results"):
            st_.slash(m, 100, caller, 100, sender=caller)
        with boa.reverts("staking: only disputes"):
            st_.report_opened(m, sender=caller)
        with boa.reverts("staking: only disputes"):
            st_.report_closed(m, sender=caller)
    d = stack.disputes.address
    with boa.reverts("staking: no open report"):
        st_.report_closed(m, sender=d)
    with boa.reverts("staking: bad fraction"):
        st_.slash(m, 10_001, d, 0, sender=d)
    with boa.reverts("staking: bad fraction"):
        st_.slash(m, 0, d, 10_001, sender=d)
    r = stack.results.address  # the signers of a rejected result are slashed through results
    assert st_.slash(m, 1000, d, 0, sender=r) == 10 * TOKEN
    assert st_.staked(m) == 90 * TOKEN


def test_slash_takes_bonded_then_queued_pays_reporter_burns_rest(stack):
    st_, token = stack.staking, stack.token
    m = join(stack, MINER, 150 * TOKEN)
    reporter = boa.env.generate_address()
    st_.request_unbond(100 * TOKEN, sender=m)  # 50 bonded, 100 queued
    supply = token.totalSupply()
    amount = st_.slash(m, 6000, reporter, 2500, sender=stack.disputes.address)
    (ev,) = last_logs(st_, "Slashed")
    assert amount == 90 * TOKEN  # 60% of 150
    assert (st_.staked(m), st_.unbonding(m)) == (0, 60 * TOKEN)
    assert (st_.total_staked(), st_.total_unbonding(), st_.total_slashed()) == (0, 60 * TOKEN, 90 * TOKEN)
    assert (ev.account, ev.amount, ev.reporter, ev.reporter_reward, ev.burned) == (
        m, 90 * TOKEN, reporter, 45 * TOKEN // 2, 135 * TOKEN // 2)
    assert token.balanceOf(reporter) == 45 * TOKEN // 2
    assert token.totalSupply() == supply - 135 * TOKEN // 2
    assert token.balanceOf(st_.address) == 60 * TOKEN


def test_slash_below_minimum_revokes_miner_eligibility(stack):
    st_ = stack.staking
    m = join(stack, MINER, 150 * TOKEN)
    assert st_.eligible_miner_count() == 1
    st_.slash(m, 2000, stack.deployer, 0, sender=stack.disputes.address)  # 120 left
    assert st_.is_eligible_miner(m)
    st_.slash(m, 2000, stack.deployer, 0, sender=stack.disputes.address)  # 96 left
    assert not st_.is_eligible_miner(m)
    assert st_.eligible_miner_count() == 0


# -- the permitted set: first come up to K, then a larger stake evicts the smallest ---------------


def permits_ref(stakes: list, accounts: list, k: int, minimum: int) -> tuple[list, list]:
    """The permitted set after `accounts` stake `stakes` in turn, and which of them were refused."""
    listed: list = []
    refused = []
    for a, s in zip(accounts, stakes, strict=True):
        if s < minimum:
            continue
        if len(listed) == k:
            smallest = min(listed, key=lambda x: (x[1], -int(str(x[0]), 16)))
            if s <= smallest[1]:
                refused.append(a)
                continue
            i = listed.index(smallest)
            last = listed.pop()
            if last != smallest:
                listed[i] = last
        listed.append((a, s))
    return [a for a, _ in listed], refused


@settings(max_examples=30, deadline=None)
@given(
    k=st.integers(1, 6),
    stakes=st.lists(st.sampled_from([0, 150, 200, 201, 300, 300, 999]), min_size=1, max_size=10),
)
def test_the_permitted_set_matches_the_reference(k, stakes):
    with boa.env.anchor():
        stack = deploy_stack(Params(max_permits=k))
        accounts = [join(stack, VALIDATOR, 0, funds=1000 * TOKEN) for _ in stakes]
        expected, refused = permits_ref([s * TOKEN for s in stakes], accounts, k, 200 * TOKEN)
        for a, s in zip(accounts, stakes, strict=True):
            if not s:
                continue
            if a in refused:
                with boa.reverts("staking: validator set full, stake not above the smallest"):
                    stack.staking.stake(s * TOKEN, sender=a)
            else:
                stack.staking.stake(s * TOKEN, sender=a)
        assert listed(stack) == expected


# -- the eligible-validator list ------------------------------------------------------------------


def listed(stack) -> list:
    st_ = stack.staking
    out = [st_.validators(i) for i in range(st_.validator_count())]
    assert [st_.validator_index(v) for v in out] == list(range(1, len(out) + 1))
    return out


def test_validator_list_holds_exactly_the_staked_validators(stack):
    st_, p = stack.staking, stack.params
    a, b, c = (join(stack, VALIDATOR, s) for s in (p.min_validator_stake, p.min_validator_stake - 1, 300 * TOKEN))
    assert listed(stack) == [a, c] and st_.validator_index(b) == 0
    st_.stake(1, sender=b)  # reaches the minimum: joins at the end
    (ev,) = last_logs(st_, "ValidatorSetChanged")
    assert (ev.account, ev.added, ev.size) == (b, True, 3)
    assert listed(stack) == [a, c, b]
    st_.stake(TOKEN, sender=b)  # already listed: no second entry
    assert last_logs(st_, "ValidatorSetChanged") == [] and listed(stack) == [a, c, b]
    st_.request_unbond(1, sender=a)  # drops below: the last entry takes its place
    (ev,) = last_logs(st_, "ValidatorSetChanged")
    assert (ev.account, ev.added, ev.size) == (a, False, 2)
    assert listed(stack) == [b, c] and st_.validator_index(a) == 0
    st_.slash(b, 5000, stack.deployer, 0, sender=stack.disputes.address)  # slashed below the minimum
    assert listed(stack) == [c]
    st_.request_unbond(300 * TOKEN, sender=c)  # the only (and last) entry leaves
    assert listed(stack) == []
    st_.stake(1, sender=a)  # back at the minimum
    assert listed(stack) == [a] and st_.staked(a) == p.min_validator_stake
    m = join(stack, MINER, 1000 * TOKEN)  # miners never enter the list
    assert listed(stack) == [a] and st_.validator_index(m) == 0


@settings(max_examples=20, deadline=None)
@given(ops=st.lists(st.tuples(st.integers(0, 4), st.booleans(), st.sampled_from([1, 50, 150, 200])), max_size=25))
def test_validator_list_matches_eligibility_under_random_stake_changes(ops):
    with boa.env.anchor():
        stack = deploy_stack()
        st_, minimum = stack.staking, stack.params.min_validator_stake
        vals = [join(stack, VALIDATOR, 0, funds=2000 * TOKEN) for _ in range(5)]
        for i, unbond, amount in ops:
            v, amount = vals[i], amount * TOKEN
            if unbond:
                if amount <= st_.staked(v):
                    st_.request_unbond(amount, sender=v)
            else:
                st_.stake(amount, sender=v)
            assert set(listed(stack)) == {v for v in vals if st_.staked(v) >= minimum}


def test_validator_set_full_then_reopens():
    stack = deploy_stack(Params(min_validator_stake=1, max_permits=256), amount=10**30)
    st_, token = stack.staking, stack.token
    for _ in range(256):
        a = boa.env.generate_address()
        token.transfer(a, 1, sender=stack.deployer)
        token.approve(st_.address, 1, sender=a)
        st_.register(VALIDATOR, NODE_KEY, MULTIADDR, SIG, sender=a)
        st_.stake(1, sender=a)
    assert st_.validator_count() == 256
    late = join(stack, VALIDATOR, 0, funds=1000 * TOKEN)
    with boa.reverts("staking: validator set full, stake not above the smallest"):
        st_.stake(1, sender=late)  # a tie with the smallest does not evict (rule 7)
    first = st_.validators(0)
    st_.request_unbond(1, sender=first)  # one leaves, making room
    assert st_.validator_count() == 255
    st_.stake(1000 * TOKEN, sender=late)
    assert st_.validator_count() == 256 and listed(stack)[-1] == late


# -- rule 6: when a miner's eligibility began ------------------------------------------------------


def test_eligible_since_starts_on_reaching_the_minimum_and_resets_below_it(stack):
    st_, p = stack.staking, stack.params
    a, b = join(stack, MINER, p.min_miner_stake - 1), join(stack, MINER, 0)
    assert st_.eligible_since(a) == 0 and st_.eligibility_clock() == 0
    st_.stake(1, sender=a)
    assert st_.eligible_since(a) == st_.eligibility_clock() == 1
    st_.stake(p.min_miner_stake, sender=b)
    assert st_.eligible_since(b) == st_.eligibility_clock() == 2
    st_.stake(TOKEN, sender=a)  # a top-up keeps it
    st_.request_unbond(TOKEN, sender=a)  # staying at the minimum keeps it
    assert st_.eligible_since(a) == 1
    st_.request_unbond(1, sender=a)
    assert st_.eligible_since(a) == 0 and st_.eligibility_clock() == 2
    st_.stake(1, sender=a)  # re-staking is a fresh start
    assert st_.eligible_since(a) == st_.eligibility_clock() == 3
    v = join(stack, VALIDATOR, p.min_validator_stake)
    assert st_.eligible_since(v) == 0 and st_.eligibility_clock() == 3  # validators never tick it


def test_a_slash_below_the_minimum_resets_eligible_since_and_one_above_keeps_it(stack):
    st_, p, d = stack.staking, stack.params, stack.disputes.address
    kept, dropped = join(stack, MINER, 4 * p.min_miner_stake), join(stack, MINER, p.min_miner_stake)
    reporter = boa.env.generate_address()
    st_.slash(kept, 5000, reporter, 0, sender=d)
    assert st_.eligible_since(kept) == 1 and st_.is_eligible_miner(kept)
    st_.slash(dropped, 5000, reporter, 0, sender=d)
    assert st_.eligible_since(dropped) == 0 and not st_.is_eligible_miner(dropped)
    st_.stake(p.min_miner_stake, sender=dropped)
    assert st_.eligible_since(dropped) == 3


@settings(max_examples=25, deadline=None)
@given(ops=st.lists(st.tuples(st.integers(0, 2), st.booleans(), st.sampled_from([1, 50, 100])), max_size=20))
def test_eligible_since_follows_the_order_miners_became_eligible(ops):
    """Property: `eligible_since` is nonzero exactly for the eligible miners, and a miner that
    (re)became eligible later always holds a larger value."""
    with boa.env.anchor():
        stack = deploy_stack()
        st_ = stack.staking
        miners = [join(stack, MINER, 0, funds=1000 * TOKEN) for _ in range(3)]
        order: list = []  # miners in the order their current eligibility began
        for i, unbond, amount in ops:
            m, amount = miners[i], amount * TOKEN
            if unbond:
                if amount > st_.staked(m):
                    continue
                st_.request_unbond(amount, sender=m)
            else:
                st_.stake(amount, sender=m)
            eligible = st_.staked(m) >= stack.params.min_miner_stake
            if not eligible and m in order:
                order.remove(m)
            elif eligible and m not in order:
                order.append(m)
            assert (st_.eligible_since(m) != 0) == eligible
        values = [st_.eligible_since(m) for m in order]
        assert values == sorted(values) and len(set(values)) == len(values)


# -- rule 7: a full validator set admits a larger stake by evicting the smallest ------------------


def fill(stack, n: int, stake_of) -> list:
    """`n` validators staking `stake_of(i)` each (cheap accounts: transfer, approve, register, stake)."""
    st_, token = stack.staking, stack.token
    out = []
    for i in range(n):
        a = boa.env.generate_address()
        token.transfer(a, stake_of(i), sender=stack.deployer)
        token.approve(st_.address, stake_of(i), sender=a)
        st_.register(VALIDATOR, NODE_KEY, MULTIADDR, SIG, sender=a)
        st_.stake(stake_of(i), sender=a)
        out.append(a)
    return out


def key(a) -> int:
    return int(str(a), 16)


def test_256_squatters_at_the_minimum_cannot_lock_out_a_larger_stake():
    """Attack: 256 accounts at the validator minimum used to fill the set for good ("validator
    set full" whatever a newcomer staked). A larger stake now gets in and evicts the smallest
    squatter (ties: the higher address), which keeps its tokens."""
    stack = deploy_stack(Params(max_permits=256))
    st_, minimum = stack.staking, stack.params.min_validator_stake
    squatters = fill(stack, 256, lambda i: minimum)
    assert st_.validator_count() == 256
    newcomer = join(stack, VALIDATOR, 0, funds=1000 * TOKEN)
    with boa.reverts("staking: validator set full, stake not above the smallest"):
        st_.stake(minimum, sender=newcomer)  # a tie does not evict
    st_.stake(minimum + 1, sender=newcomer)
    victim = max(squatters, key=key)
    (ev,) = last_logs(st_, "ValidatorEvicted")
    assert (ev.account, ev.stake, ev.by) == (victim, minimum, newcomer)
    assert st_.validator_count() == 256 and st_.validator_index(victim) == 0
    assert st_.eligible_role(victim) == 0 and st_.eligible_role(newcomer) == VALIDATOR
    assert st_.staked(victim) == minimum and st_.total_staked() == 257 * minimum + 1  # nothing leaves staking
    listed = {st_.validators(i) for i in range(256)}
    assert listed == (set(squatters) - {victim}) | {newcomer}
    assert all(st_.validators(st_.validator_index(v) - 1) == v for v in listed)
    # the next newcomer evicts the next-highest squatter
    second = join(stack, VALIDATOR, minimum + 1)
    assert last_logs(st_, "ValidatorEvicted")[0].account == sorted(squatters, key=key)[-2]
    assert {newcomer, second} <= {st_.validators(i) for i in range(256)}


def test_eviction_takes_the_lowest_stake_wherever_it_sits():
    stack = deploy_stack(Params(min_validator_stake=1, max_permits=256), amount=10**30)
    st_ = stack.staking
    vals = fill(stack, 256, lambda i: 1000 + ((i + 5) * 239) % 256)  # distinct; the lowest is entry 252
    lowest = min(vals, key=st_.staked)
    assert st_.validator_index(lowest) not in (1, 256)  # neither the first nor the last entry
    newcomer = join(stack, VALIDATOR, 0, funds=2000)
    with boa.reverts("staking: validator set full, stake not above the smallest"):
        st_.stake(st_.staked(lowest), sender=newcomer)
    st_.stake(st_.staked(lowest) + 1, sender=newcomer)
    assert last_logs(st_, "ValidatorEvicted")[0].account == lowest and st_.validator_index(lowest) == 0


def test_an_honest_validator_above_the_squatters_keeps_its_permit():
    """Honest pair: evictions take only the smallest, so validators above the squatters keep
    their places and their permits however many newcomers evict."""
    stack = deploy_stack(Params(max_permits=256))
    st_, minimum = stack.staking, stack.params.min_validator_stake
    honest = [join(stack, VALIDATOR, s * TOKEN) for s in (1000, 900)]
    fill(stack, 254, lambda i: minimum)
    assert listed(stack)[:2] == honest
    for _ in range(3):
        join(stack, VALIDATOR, minimum + 1)
    after = listed(stack)
    assert after[:2] == honest and all(st_.eligible_role(h) == VALIDATOR for h in honest)
    assert len(after) == stack.params.max_permits


def test_an_evicted_validator_withdraws_its_tokens_after_the_unbonding_delay():
    stack = deploy_stack(Params(max_permits=256))
    st_, token, minimum = stack.staking, stack.token, stack.params.min_validator_stake
    squatters = fill(stack, 256, lambda i: minimum)
    join(stack, VALIDATOR, minimum + 1)
    victim = max(squatters, key=key)
    assert st_.eligible_role(victim) == 0 and token.balanceOf(victim) == 0
    st_.request_unbond(minimum, sender=victim)  # unbonding never rejoins or reverts
    assert st_.validator_count() == 256 and st_.eligible_role(victim) == 0
    with boa.reverts("staking: still unbonding"):
        st_.withdraw(sender=victim)
    boa.env.time_travel(seconds=stack.params.unbonding_delay)
    st_.withdraw(sender=victim)
    assert token.balanceOf(victim) == minimum and st_.staked(victim) == st_.unbonding(victim) == 0


def test_an_evicted_validator_stays_slashable_and_report_bound():
    """An evicted account keeps its stake accounting: an open report still blocks its withdrawal
    and a slash still takes its share (without rejoining it, and without reverting)."""
    stack = deploy_stack(Params(max_permits=256))
    st_, minimum, d = stack.staking, stack.params.min_validator_stake, stack.disputes.address
    squatters = fill(stack, 256, lambda i: minimum)
    join(stack, VALIDATOR, minimum + 1)
    victim = max(squatters, key=key)
    st_.report_opened(victim, sender=d)
    st_.request_unbond(minimum // 2, sender=victim)
    boa.env.time_travel(seconds=stack.params.unbonding_delay)
    with boa.reverts("staking: report pending"):
        st_.withdraw(sender=victim)
    supply = stack.token.totalSupply()
    assert st_.slash(victim, 5000, boa.env.generate_address(), 0, sender=d) == minimum // 2
    assert st_.staked(victim) == 0 and st_.unbonding(victim) == minimum // 2
    assert st_.total_slashed() == minimum // 2 and stack.token.totalSupply() == supply - minimum // 2
    assert st_.eligible_role(victim) == 0 and st_.validator_count() == 256
    st_.report_closed(victim, sender=d)
    st_.withdraw(sender=victim)
    assert stack.token.balanceOf(victim) == minimum // 2


def test_an_evicted_validator_rejoins_only_by_outstaking_the_smallest():
    stack = deploy_stack(Params(max_permits=256))
    st_, minimum = stack.staking, stack.params.min_validator_stake
    squatters = fill(stack, 256, lambda i: minimum)
    join(stack, VALIDATOR, minimum + 1)
    victim = max(squatters, key=key)
    stack.token.transfer(victim, 10, sender=stack.deployer)
    stack.token.approve(st_.address, 10, sender=victim)
    st_.stake(1, sender=victim)  # minimum + 1 > minimum: evicts the next squatter
    assert last_logs(st_, "ValidatorEvicted")[0].account == sorted(squatters, key=key)[-2]
    assert st_.eligible_role(victim) == VALIDATOR


def test_permits_and_round_snapshot_at_the_caps():
    """Every bounded loop at its cap: 256 permits (the eviction scan, `validators_of`,
    `weights_of`), and a round that opens on them freezes a version whatever the set's size."""
    stack = deploy_stack(Params(min_validator_stake=1, max_permits=256), amount=10**30)
    st_ = stack.staking
    fill(stack, 256, lambda i: 1000 + (i * 7919) % 300)  # repeated stakes: ties by address
    newcomer = join(stack, VALIDATOR, 0, funds=10**6)
    st_.stake(10**6, sender=newcomer)
    expected = listed(stack)
    assert len(expected) == 256 and newcomer in expected
    join(stack, MINER, stack.params.min_miner_stake)
    stack.settlement.start()
    print(f"start with 256 permits: {stack.settlement.rounds._computation.get_gas_used()} gas")
    stakes = [st_.staked(v) for v in expected]
    assert list(stack.settlement.validators_of(0)) == expected
    assert list(stack.settlement.weights_of(0, expected)) == stakes
    assert stack.settlement.total_weight(0) == sum(stakes) and stack.settlement.validator_count(0) == 256
