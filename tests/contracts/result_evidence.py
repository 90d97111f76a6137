"""Posted results and challenge calldata for the challenge-contract tests and benchmarks.

A `Posted` is what validators would sign for a round: the reference result (or a tampered one),
its column sum tree, validator entries, claims and header words. The calldata helpers turn it
into the tuples the challenge contracts take, so a test only says which value is wrong.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import boa

from protocol.chain.challenge_args import entry_at_arg
from protocol.chain.challenge_args import light_reveals_arg as chain_light_reveals_arg
from protocol.chain.challenge_args import reveals_arg as chain_reveals_arg
from protocol.core.crypto.keccak import keccak256
from protocol.core.settlement.abi_words import word
from protocol.core.settlement.claims_tree import claims_list_hash, claims_root
from protocol.core.settlement.entries_tree import entry_hash, validators_hash
from protocol.core.settlement.result import RoundResult, compute_result
from protocol.core.settlement.result_header import ResultHeader, round_claim_leaves
from protocol.core.settlement.result_inputs import RoundInputs
from protocol.core.settlement.result_tree import ColumnTree, Node, node_hash, parent
from protocol.core.settlement.score_vector import segments_root

ROOT = Path(__file__).resolve().parents[2]
HARNESS = Path(__file__).resolve().parent / "harness"
ZERO = b"\x00" * 32
BOND = 10 * 10**18
WINDOW = 100
RUN_CONFIG = keccak256(b"run config")
NON_SIGNERS = keccak256(b"non-signers")


@dataclass
class Posted:
    inputs: RoundInputs
    result: RoundResult
    tree: ColumnTree
    entries: list[tuple]  # validator entries' fields: (j, account, credit, cumulative, prev, prev_index)
    claims: list[bytes]
    header: list[bytes]  # the 15 header words
    model: bytes = field(default=ZERO)

    @property
    def round(self) -> int:
        return self.inputs.round

    def result_root(self) -> bytes:
        return keccak256(b"".join(self.header))


@dataclass
class Stack:
    token: object
    facts: object
    results: object
    columns: object
    trees: object
    accounts: object
    claims: object
    challenger: str

    @property
    def chain_id(self) -> int:
        return self.facts.chain_id()


def deploy(committee: int = 0) -> Stack:
    """Token, stand-in chain facts and results, and the four challenge contracts (`committee`:
    ColumnChallenges' committee size); the challenger holds tokens."""
    challenger = boa.env.generate_address("challenger")
    token = boa.load_partial(str(ROOT / "contracts" / "Token.vy")).deploy([challenger], [1000 * BOND])
    facts = boa.load_partial(str(HARNESS / "FactsStandIn.vy")).deploy()
    results = boa.load_partial(str(HARNESS / "ResultsStandIn.vy")).deploy(WINDOW)
    args = (token.address, facts.address, facts.address, facts.address, results.address, BOND)
    columns = boa.load_partial(str(ROOT / "contracts" / "ColumnChallenges.vy")).deploy(*args, committee)
    trees, accounts, claims = (boa.load_partial(str(ROOT / "contracts" / f"{name}.vy")).deploy(*args)
                               for name in ("TreeChallenges", "AccountChallenges", "ClaimsChallenges"))
    for contract in (columns, trees, accounts, claims):
        results.allow(contract.address)
        with boa.env.prank(challenger):
            token.approve(contract.address, 2**256 - 1)
    return Stack(token, facts, results, columns, trees, accounts, claims, challenger)


def publish(stack: Stack, inputs: RoundInputs, model: bytes = ZERO) -> None:
    """Puts a round's chain facts on the stand-in: commits, validators, reveals, forfeits, economics."""
    facts = stack.facts
    facts.set_miners(inputs.round, list(inputs.miners))
    facts.set_validators(inputs.round, list(inputs.validators), list(inputs.weights))
    for v in inputs.validators:
        root = ZERO
        if v in inputs.reveals:
            r = inputs.reveals[v]
            root = segments_root(stack.chain_id, facts.address, v, inputs.round, r.revealed_segments, r.witness_root,
                                 r.heldout_loss)
        facts.set_vector_root(inputs.round, v, root)
    for account in inputs.miners + inputs.validators:
        facts.set_forfeited(inputs.round, account, account in inputs.forfeited)
    facts.set_model(inputs.round, model)
    facts.set_seed(inputs.round, inputs.seed)
    facts.set_economics(inputs.emission, inputs.miner_share_bps, RUN_CONFIG)
    accounts = list(inputs.miners + inputs.validators)
    masks = list(inputs.miner_classes or (0,) * inputs.n) + list(inputs.validator_classes or (0,) * len(inputs.validators))
    facts.set_classes(accounts, masks, inputs.min_class_weight)


def settle(stack: Stack, inputs: RoundInputs, result: RoundResult | None = None, *, tree: ColumnTree | None = None,
           entries: list[tuple] | None = None, claims: list[bytes] | None = None, model: bytes | None = None,
           words: dict[int, bytes | int] | None = None) -> Posted:
    """The result posted for `inputs`: the reference unless a part (or header words) is given."""
    result = result or compute_result(inputs)
    tree = tree or ColumnTree.build(inputs, result)
    if entries is None:
        entries = [(j, v, result.validator_credit[j], result.validator_cumulative[j], *inputs.prev_pointer(v))
                   for j, v in enumerate(inputs.validators)]
    claims = list(claims if claims is not None else round_claim_leaves(inputs, result))
    model = model if model is not None else (keccak256(b"next model %d" % inputs.round) if result.quorum else ZERO)
    header = ResultHeader(
        chain_id=stack.chain_id, results_contract=stack.results.address, run_config_hash=RUN_CONFIG,
        round=inputs.round, model_hash=model, tree_root=tree.tree_root(),
        validators_hash=validators_hash([entry_hash(*e) for e in entries]), claims_root=claims_root(claims),
        claims_list_hash=claims_list_hash(claims), n=result.n, minted=result.minted,
        heldout_loss=result.heldout_loss, quorum=result.quorum)
    out = list(header.words())
    for k, value in (words or {}).items():
        out[k] = word(value)
    return Posted(inputs, result, tree, entries, claims, out, model)


def tampered(result: RoundResult, **changes) -> RoundResult:
    """The result with some fields replaced (tuples: pass the whole new tuple)."""
    return replace(result, **changes)


def with_node(tree: ColumnTree, level: int, index: int, node: Node) -> ColumnTree:
    """The tree with one node replaced and every ancestor rebuilt from its children."""
    levels = [list(lv) for lv in tree.levels]
    levels[level][index] = node
    for lv in range(level + 1, len(levels)):
        index >>= 1
        levels[lv][index] = parent(levels[lv - 1][2 * index], levels[lv - 1][2 * index + 1])
    return ColumnTree(tuple(tuple(lv) for lv in levels))


def with_sums(tree: ColumnTree, level: int, index: int, sums: tuple[int, ...]) -> ColumnTree:
    """The tree with one node's sums replaced (its ancestors add their children's, so only it is wrong)."""
    body = tree.levels[level][index].body
    return with_node(tree, level, index, Node(node_hash(body, sums), body, sums))


def post(stack: Stack, posted: Posted, attempt: int = 1) -> tuple:
    """Makes `posted` the round's pending attempt, posted now; returns the attempt's five arguments."""
    now = boa.env.evm.patch.timestamp
    stack.results.set_pending(posted.round, stack.results.commitment_of(posted.result_root(), NON_SIGNERS, now, attempt))
    return (posted.round, posted.header, NON_SIGNERS, now, attempt)


def finalize(stack: Stack, posted: Posted) -> None:
    stack.results.set_final(posted.round, posted.result_root())


# calldata -------------------------------------------------------------------------------------

def leaf_fields(posted: Posted, i: int) -> tuple:
    """Column i's fields as the tree holds them."""
    miner = posted.inputs.miners[i]
    prev, prev_index = posted.inputs.prev_pointer(miner)
    return (i, int(miner, 16), posted.result.reputation[i], posted.result.cumulative[i], prev, prev_index)


def path_arg(tree: ColumnTree, level: int, index: int) -> tuple:
    path = tree.inclusion_path(level, index)
    return ([s for s, _ in path], [h for _, h in path])


def leaf_args(posted: Posted, i: int) -> tuple:
    """(leaf, sums, path) of column i."""
    return (leaf_fields(posted, i), list(posted.tree.levels[0][i].sums), path_arg(posted.tree, 0, i))


def root_arg(posted: Posted) -> tuple:
    if posted.tree.tree_root() == ZERO:
        return (ZERO, [])
    body, sums = posted.tree.root_preimage()
    return (body, list(sums))


def node_arg(tree: ColumnTree, level: int, index: int) -> tuple:
    body, sums = tree.node_preimage(level, index)
    return (body, list(sums))


def reveals_arg(inputs: RoundInputs, column: int) -> list[tuple]:
    """The reveals that count in `column`, cut to it, as challengers build them."""
    return chain_reveals_arg(inputs, column)


def light_reveals_arg(inputs: RoundInputs) -> tuple:
    """Every validator's reveal for a header challenge, as challengers build it."""
    return chain_light_reveals_arg(inputs)


def entries_arg(posted: Posted) -> list[tuple]:
    return [(j, int(a, 16), credit, cum, prev, prev_index) for j, a, credit, cum, prev, prev_index in posted.entries]


def entry_at(posted: Posted, j: int) -> tuple:
    """Entry `j` of the posted list with its path: what an entry challenge carries."""
    return entry_at_arg(entries_arg(posted), j)
