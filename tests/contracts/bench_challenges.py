"""Gas of the biggest challenges (1024 columns x 64 validators, all revealed): not a test.

Run: `PYTHONPATH=. python -m tests.contracts.bench_challenges [columns] [validators]`. Prints the
execution gas (what the contract spends), the calldata bytes and their intrinsic gas
(16 a nonzero byte, 4 a zero byte, plus 21,000), and the total.
"""

from __future__ import annotations

import sys

import boa

from protocol.core.crypto.keccak import checksum_address, keccak256
from protocol.core.settlement.abi_words import list_hash
from protocol.core.settlement.result_inputs import Reveal, RoundInputs
from tests.contracts.result_evidence import (
    deploy,
    leaf_args,
    post,
    publish,
    reveals_arg,
    root_arg,
    settle,
)

T = 10**18


def big_round(n: int, v: int) -> RoundInputs:
    """An n x v round in which every validator revealed."""
    accounts = [checksum_address(keccak256(b"bench %d" % k)[:20]) for k in range(n + v)]
    miners, validators = tuple(accounts[:n]), tuple(accounts[n:])
    reveals = {x: Reveal(tuple((j * 7919 + i * 104729) % 65536 for i in range(n)), 500_000 + j,
                         keccak256(b"w%d" % j)) for j, x in enumerate(validators)}
    return RoundInputs(1, miners, validators, tuple((j + 1) * T for j in range(v)), reveals,
                       frozenset(), {}, 1000 * T, 7000)


def _gas(fn, stack, args) -> dict[str, int]:
    calldata = fn.prepare_calldata(*args)
    with boa.env.prank(stack.challenger):
        fn(*args)
    execution = fn.contract._computation.net_gas_used
    assert stack.results.rejected(1) == 0  # the right value stands
    zeros = calldata.count(0)
    intrinsic = 21_000 + 4 * zeros + 16 * (len(calldata) - zeros)
    # EIP-7623 (Prague): a calldata-heavy transaction pays at least 10 gas per token
    floor = 21_000 + 10 * (zeros + 4 * (len(calldata) - zeros))
    return {"execution": execution, "calldata_bytes": len(calldata), "intrinsic": intrinsic,
            "total": execution + intrinsic, "total_prague": max(execution + intrinsic, floor)}


def challenge_gas(n: int = 1024, v: int = 64) -> dict[str, dict[str, int]]:
    """Posts a right result for an n x v round and challenges its last column, its root node and
    its claims root (each bond is burned)."""
    inputs = big_round(n, v)
    out = {}
    with boa.env.anchor():
        stack = deploy()
        publish(stack, inputs)
        posted = settle(stack, inputs)
        for name in ("column", "node", "claims_root"):
            with boa.env.anchor():
                attempt = post(stack, posted)
                if name == "column":
                    fn = stack.columns.challenge_column
                    args = (*attempt, *leaf_args(posted, n - 1), root_arg(posted), reveals_arg(inputs, n - 1))
                elif name == "node":
                    fn = stack.trees.challenge_node
                    tree, level = posted.tree, posted.tree.depth
                    left, right = tree.levels[level - 1][0], tree.levels[level - 1][1]
                    body, sums = root_arg(posted)
                    args = (*attempt, level, 0, body, list_hash(sums), ([], []), left.hash,
                            (left.body, list(left.sums)), right.hash, (right.body, list(right.sums)))
                else:
                    fn = stack.accounts.challenge_claims_root
                    args = (*attempt, posted.claims)
                out[name] = _gas(fn, stack, args)
    return out


if __name__ == "__main__":
    sizes = [int(x) for x in sys.argv[1:3]] or [1024, 64]
    for kind, gas in challenge_gas(*sizes).items():
        print(kind, gas)
