"""No function grows past 15M gas at the contracts' caps, so the chain can never halt.

One world at the caps: 64 permitted validators with BLS keys and 1,024 miners. The heaviest
settlement transactions are measured as a node would send them (execution plus intrinsic and
calldata gas, with Prague's calldata floor): the round opening (validator snapshot, aggregate
key), a full reveal, the certified post with 8 non-signers, the finalize that opens the next
round, and the heaviest challenges (a column, the claims root). About a minute: the 64 proofs of
possession are one pairing check each in py-evm (protocol/chain/evm_precompiles.py).
"""

from __future__ import annotations

import boa
import pytest
from conftest import TOKEN, Params, make_world

from protocol.chain.challenge_args import column_args
from protocol.core.settlement.abi_words import list_hash

pytestmark = pytest.mark.slow

MAX_FUNCTION_GAS = 15_000_000
MINERS, VALIDATORS = 1024, 64


def tx_gas(contract, calldata: bytes) -> int:
    """The last call's gas as a transaction: execution + 21,000 + calldata (EIP-7623 floor)."""
    zeros = calldata.count(0)
    tokens = zeros + 4 * (len(calldata) - zeros)
    standard = 21_000 + 4 * tokens + contract._computation.get_gas_used()
    return max(standard, 21_000 + 10 * tokens)


@pytest.fixture(scope="module")
def caps():
    with boa.env.anchor():
        params = Params(max_permits=VALIDATORS)
        world = make_world(params, n_miners=MINERS, validator_stakes=[200 * TOKEN + i for i in range(VALIDATORS)],
                           bls=True, start=False)
        world.s.start()
        gas = {"start (opens round 0)": world.stack.rounds._computation.get_gas_used()}
        world.to_result(0)
        yield world, gas


def test_no_settlement_function_exceeds_15m_gas_at_the_caps(caps):
    world, gas = caps
    s = world.s
    assert len(world.columns(0)) == MINERS and len(s.validators_of(0)) == VALIDATORS
    settled = world.settle(0)
    signers = [v for v in s.validators_of(0)][8:]  # 56 of 64 sign
    posted = world.post(0, settled, signers=signers)
    gas["post_result (56 of 64 sign)"] = world.stack.results._computation.get_gas_used()
    args = column_args(settled, MINERS - 1)
    world.stack.token.approve(world.stack.column_challenges.address, 2**255, sender=world.miners[0])
    world.stack.column_challenges.challenge_column(0, posted.header, list_hash(posted.non_signers), posted.posted_time,
                                                   posted.attempt, *args, sender=world.miners[0])
    calldata = world.stack.column_challenges.challenge_column.prepare_calldata(
        0, posted.header, list_hash(posted.non_signers), posted.posted_time, posted.attempt, *args)
    gas["challenge_column (1024 x 64)"] = tx_gas(world.stack.column_challenges, calldata)
    world.finalize(posted)
    gas["finalize_result (opens round 1)"] = world.stack.results._computation.get_gas_used()
    print("\n".join(f"{name}: {g:,}" for name, g in gas.items()))
    assert max(gas.values()) < MAX_FUNCTION_GAS, gas
    assert s.current_round() == 1
