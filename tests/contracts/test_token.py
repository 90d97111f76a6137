"""Token: genesis allocation, and after wiring only the rewards contract mints."""

import boa
from conftest import TOKEN, deploy_stack, last_logs, make_world, partial


def test_genesis_allocation_minted_once_to_each_holder():
    a, b = boa.env.generate_address(), boa.env.generate_address()
    token = partial("Token").deploy([a, b], [5 * TOKEN, 7 * TOKEN])
    genesis = [(e.holder, e.amount) for e in last_logs(token, "GenesisAllocation")]
    assert genesis == [(a, 5 * TOKEN), (b, 7 * TOKEN)]
    assert token.balanceOf(a) == 5 * TOKEN
    assert token.balanceOf(b) == 7 * TOKEN
    assert token.totalSupply() == 12 * TOKEN
    assert (token.name(), token.symbol(), token.decimals()) == ("veritrain", "VTRN", 18)


def test_genesis_lengths_must_match():
    a = boa.env.generate_address()
    with boa.reverts("token: holders and amounts differ in length"):
        partial("Token").deploy([a, a], [TOKEN])


def test_after_wiring_only_rewards_can_mint():
    stack = deploy_stack()
    token, deployer = stack.token, stack.deployer
    assert token.owner() == "0x" + "00" * 20
    assert token.is_minter(stack.rewards.address)
    assert not token.is_minter(deployer)
    with boa.reverts("erc20: access is denied"):
        token.mint(deployer, TOKEN, sender=deployer)
    with boa.reverts("ownable: caller is not the owner"):
        token.set_minter(deployer, True, sender=deployer)
    with boa.reverts("ownable: caller is not the owner"):
        token.transfer_ownership(deployer, sender=deployer)
    stranger = boa.env.generate_address()
    with boa.reverts("erc20: access is denied"):
        token.mint(stranger, TOKEN, sender=stranger)
    assert token.totalSupply() == stack.genesis


def test_supply_grows_only_by_a_final_result_and_shrinks_by_burns():
    w = make_world(bls=True)
    supply = w.t.totalSupply()
    w.run_round(0, {w.validators[0]: [100, 200, 300], w.validators[1]: [100, 200, 300]})
    minted = w.s.total_minted()
    assert minted == w.settled[0].header.minted > 0
    assert w.t.totalSupply() == supply + minted
    assert w.t.balanceOf(w.stack.rewards.address) == minted
    holder = w.miners[0]
    w.t.burn(TOKEN, sender=holder)
    assert w.t.totalSupply() == supply + minted - TOKEN
