"""No function grows past 15M gas or 128 KB of calldata at the contracts' bounds, so the chain
can never halt.

One world at the bounds: 1,024 permitted validators with BLS keys, 16,384 miners committing (a
16,385th is refused: the commit that fills the round closes its commit phase, so min-stake
sybils cannot make every reveal impossible), committees of 3 (a run without committees permits
at most 16 validators). Each settlement transaction a node sends is measured as sent (execution
plus intrinsic and calldata gas, with Prague's calldata floor), with its calldata: the round
opening (it freezes a version of the permitted set: no copy at any size), a full reveal (every
miner scored: 16,384 entries; the others reveal their seats, about 96 entries each), the
certified post with 341 non-signers, every kind of challenge whose evidence grows with the round
(a column, a tree node, the header, minted, a validator entry, the claims root, a claims chunk,
a claim), the answer of the validator entries, the finalize that opens the next round, and the
stake that changes a full set most (a newcomer evicting the smallest of 1,024 keyed validators:
its key leaves the aggregate). A few minutes: each of the 1,024 proofs of possession is proven
in py_ecc and checked on chain (natively, protocol/chain/evm_precompiles.py).
"""

from __future__ import annotations

import boa
import pytest
from conftest import (
    MULTIADDR,
    NODE_KEY,
    PHASE_SCORING,
    SIG,
    TOKEN,
    VALIDATOR,
    Params,
    bls_material,
    bound_pop,
    make_world,
)

from protocol.chain.challenge_args import (
    answered_entries_arg,
    claims_arg,
    claims_chunk_arg,
    column_args,
    entries_arg,
    entry_at_arg,
    leaf_answer_args,
    light_reveals_arg,
    root_arg,
)
from protocol.core.settlement.abi_words import list_hash
from protocol.core.settlement.claims_tree import chunk_count
from protocol.core.settlement.result_inputs import MAX_MINERS, MAX_VALIDATORS
from validator.fault_proofs import node_proof
from validator.posted_parts import PostedLeaf

pytestmark = pytest.mark.slow

MAX_FUNCTION_GAS = 15_000_000
MAX_CALLDATA = 128 * 1024
MINERS, VALIDATORS = MAX_MINERS, MAX_VALIDATORS
NON_SIGNERS = (VALIDATORS - 1) // 3  # 683 of 1,024 equal stakes sign: > 2/3


def tx_gas(contract, calldata: bytes) -> int:
    """The last call's gas as a transaction: execution + 21,000 + calldata (EIP-7623 floor)."""
    zeros = calldata.count(0)
    tokens = zeros + 4 * (len(calldata) - zeros)
    standard = 21_000 + 4 * tokens + contract._computation.get_gas_used()
    return max(standard, 21_000 + 10 * tokens)


class Costs:
    """Every measured transaction: name -> (gas, calldata bytes)."""

    def __init__(self) -> None:
        self.rows: dict[str, tuple[int, int]] = {}

    def send(self, name: str, contract, fn: str, *args, sender) -> None:
        """Sends `contract.fn(*args)` and records its gas and calldata."""
        method = getattr(contract, fn)
        calldata = method.prepare_calldata(*args)
        try:
            method(*args, sender=sender)
        except boa.BoaError:  # its message repeats every argument: say what reverted, briefly
            computation = contract._computation
            raise AssertionError(f"{name}: {computation.error!r} {bytes(computation.output)[68:].rstrip(bytes(1))!r}, "
                                 f"{computation.get_gas_used():,} gas") from None
        self.rows[name] = (tx_gas(contract, calldata), len(calldata))


@pytest.fixture(scope="module")
def bounds():
    with boa.env.anchor():
        params = Params(max_permits=VALIDATORS, committee=3, min_miner_stake=1)
        world = make_world(params, n_miners=MINERS + 1, validator_stakes=[200 * TOKEN] * VALIDATORS, bls=True,
                           start=False, miners_bond=False)
        costs = Costs()
        costs.send(f"start (opens round 0 on {VALIDATORS} keyed validators)", world.stack.rounds,
                   "start", sender=world.stack.deployer)
        miners, extra = world.miners[:MINERS], world.miners[MINERS]
        world.commit_all(0, miners)
        with boa.reverts("settlement: commit phase closed"):  # the 16,384th commit closed it
            world.s.commit_update(0, b"\xaa" * 32, b"\xbb" * 32, sender=extra)
        world.to_scoring(0, miners)
        world.s.store_seed(0, sender=world.validators[0])
        scores = world.seated_scores_for(0)  # about 2c n / v = 384 entries each
        scores[next(iter(scores))] = world.scores_for(0)[next(iter(scores))]  # and one of all 16,384
        for v, sc in scores.items():
            world.commit_scores(0, v, sc)
        if world.s.phase(0) == PHASE_SCORING:  # every validator committed: scoring closed early
            boa.env.time_travel(seconds=params.score_duration)
        for k, v in enumerate(scores):
            if k == 0:
                costs.send("reveal_scores (16,384 entries)", world.stack.scores, "reveal_scores", 0,
                           *world.reveal_args(0, v), sender=v)
            else:
                world.reveal(0, v)
        world.to_result(0, scores={}, miners=miners)  # closes the reveal and the audit
        yield world, costs


def test_a_round_at_the_bounds_settles_and_no_call_exceeds_15m_gas_or_128_kb(bounds):
    world, costs = bounds
    s, stack = world.s, world.stack
    assert s.round_info(0)[1] == MINERS and len(s.validators_of(0)) == VALIDATORS
    v0 = s.validators_of(0)[0]
    segments = world.reveal_args(0, v0)[0]
    assert len(segments) == MINERS // 1024 and sum(len(seg) for seg in segments) == 4 * MINERS
    settled = world.settle(0)
    signers = list(s.validators_of(0))[NON_SIGNERS:]
    posted = world.post(0, settled, signers=signers)
    calldata = stack.results.post_result.prepare_calldata(posted.header, world.sign(posted.header, signers),
                                                          *world.non_signer_args(0, signers))
    costs.rows[f"post_result ({VALIDATORS - NON_SIGNERS} of {VALIDATORS} sign)"] = (tx_gas(stack.results, calldata),
                                                                                    len(calldata))
    attempt = (0, posted.header, list_hash(posted.non_signers), posted.posted_time, posted.attempt)
    challenger = world.validators[1]
    last = MINERS - 1
    right = {  # name: (contract, function, evidence), each a right value: the bond burns, nothing is rejected
        "challenge_column (column 16,383)": (stack.column_challenges, "challenge_column", column_args(settled, last)),
        f"challenge_node (a level-1 node, 2 x {VALIDATORS + 2} sums)": (stack.tree_challenges, "challenge_node",
                                                          node_proof(settled, _posted_leaf(settled, last), 0).args),
        f"challenge_header ({VALIDATORS} light reveals)": (stack.account_challenges, "challenge_header",
                                                 (light_reveals_arg(settled.inputs),)),
        f"challenge_minted (the root, {VALIDATORS + 2} sums)": (stack.account_challenges, "challenge_minted",
                                                          (root_arg(settled),)),
        f"challenge_validators (entry {VALIDATORS - 1} of {VALIDATORS})": (
            stack.account_challenges, "challenge_validators",
            (entry_at_arg(entries_arg(settled), VALIDATORS - 1), root_arg(settled))),
        "challenge_claims_root (33 chunk summaries)": (stack.claims_challenges, "challenge_claims_root",
                                                       (claims_arg(settled),)),
        "challenge_claims_chunk (512 claims)": (stack.claims_challenges, "challenge_claims_chunk",
                                                claims_chunk_arg(settled, 0)),
        "challenge_miner_claim (claim 16,383)": (stack.claims_challenges, "challenge_miner_claim",
                                                 (claims_arg(settled), claims_chunk_arg(settled, last // 512)[2],
                                                  *leaf_answer_args(settled, last))),
    }
    for name, (contract, fn, evidence) in right.items():
        with boa.env.anchor():
            costs.send(name, contract, fn, *attempt, *evidence, sender=challenger)
            assert stack.results.pending(0) != b"\x00" * 32, name  # a right value leaves the attempt pending
    assert len(claims_arg(settled)) == 2 * chunk_count(MINERS + VALIDATORS)
    with boa.env.anchor():  # the largest answer: every validator entry
        stack.tree_challenges.demand(*attempt, [MINERS + 1], sender=challenger)
        costs.send(f"answer_validators ({VALIDATORS} entries)", stack.tree_challenges, "answer_validators", *attempt,
                   answered_entries_arg(settled), sender=world.validators[2])
    world.finalize(posted)
    calldata = stack.results.finalize_result.prepare_calldata(*posted.final_args())
    costs.rows["finalize_result (opens round 1)"] = (tx_gas(stack.results, calldata), len(calldata))
    _evict_into_the_full_set(stack, world.miners[:3], costs)
    print("\n".join(f"{name}: {gas:,} gas, {size:,} calldata bytes" for name, (gas, size) in costs.rows.items()))
    assert s.current_round() == 1
    assert max(g for g, _ in costs.rows.values()) < MAX_FUNCTION_GAS, costs.rows
    assert max(b for _, b in costs.rows.values()) < MAX_CALLDATA, costs.rows


def _evict_into_the_full_set(stack, donors: list, costs: Costs) -> None:
    """A keyed newcomer outstakes the full set: the scan finds the smallest, its key leaves the
    aggregate and the newcomer's joins (the costliest change the permit log records)."""
    newcomer = boa.env.generate_address()
    for donor in donors:  # the supply is all handed out: three miners' spare 100 tokens
        stack.token.transfer(newcomer, 100 * TOKEN, sender=donor)
    stack.token.approve(stack.staking.address, 2**256 - 1, sender=newcomer)
    stack.staking.register(VALIDATOR, NODE_KEY, MULTIADDR, SIG, sender=newcomer)
    sk, key = bls_material(VALIDATORS)
    stack.keys.register(key, bound_pop(sk, newcomer, stack.keys), sender=newcomer)
    costs.send(f"stake (a keyed newcomer evicts the smallest of {VALIDATORS} keyed validators)", stack.staking,
               "stake", 201 * TOKEN, sender=newcomer)
    assert stack.staking.validator_count() == VALIDATORS and stack.staking.eligible_role(newcomer) == VALIDATOR


def _posted_leaf(settled, i: int) -> PostedLeaf:
    fields, sums, (siblings, sums_hashes) = leaf_answer_args(settled, i)
    return PostedLeaf(i, tuple(fields), tuple(sums), tuple(siblings), tuple(sums_hashes))
