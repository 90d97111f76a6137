"""titanoboa fixtures: the eleven contracts wired as `veritrain deploy` wires them (protocol/chain/deploy.py).

Every test runs inside `boa.env.anchor()` (state, block number, time and the fake ancestor
block hashes are restored afterwards), and the contracts are compiled once per process with
`boa.load_partial`, so a deploy costs ten CREATEs.

A round (docs/PROTOCOL.md §5 and §11): miners `commit_update` (column = commit
order), validators commit and reveal score vectors as calldata (Scores), say their audits are
done, reports resolve (Disputes), then anyone posts the result header with the validators'
aggregate BLS signature (Results), the challenge window passes, `finalize_result` pays the round
(Rewards) and opens the next one (Rounds). `World` plays these phases and computes the result
with the core's `build_result` from the facts the test itself put on chain.

Every on-chain BLS check (a key registration, a post) is a pairing check, about a second in py-evm: worlds
whose validators need keys are deployed once per module (`module_world`) and each test gets a
`fork()` of it inside its own anchor. `stack.settlement` (and `World.s`) sends a call to the
one of Rounds, Scores, Rewards or Results that defines the function.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path

import boa
import pytest
from eth_utils import keccak
from py_ecc.optimized_bls12_381 import curve_order

from protocol.core.crypto.bls import (
    bls_aggregate,
    bls_bound_pop_prove,
    bls_keygen,
    bls_public_key,
    bls_sign,
    g1_to_eip2537,
    g2_to_eip2537,
)
from protocol.core.settlement.abi_words import list_hash
from protocol.core.settlement.committees import assignments
from protocol.core.settlement.result_header import SettledRound, build_result
from protocol.core.settlement.result_inputs import Reveal, RoundInputs
from protocol.core.settlement.score_vector import pack_segments, score_commitment, vector_root

CONTRACTS = Path(__file__).resolve().parents[2] / "contracts"

MINER, VALIDATOR = 1, 2
TOKEN = 10**18
BPS = 10_000
ONE = 10**18

KIND_REPLAY, KIND_DERIVATION, KIND_UNAVAILABLE, KIND_LAZY = 1, 2, 3, 4
VOTE_CONFIRM, VOTE_REJECT, VOTE_SERVED = 1, 2, 3
STATUS_OPEN, STATUS_CONFIRMED, STATUS_REJECTED, STATUS_VOID = 1, 2, 3, 4
PHASE_NONE, PHASE_COMMIT, PHASE_SCORING, PHASE_REVEAL, PHASE_AUDIT, PHASE_RESULT, PHASE_DONE = range(7)
ATTEMPT_NONE, ATTEMPT_PENDING, ATTEMPT_REJECTED, ATTEMPT_FINAL = range(4)

SIG = b"\x02" * 64
NO_WITNESS = b"\x00" * 32
NODE_KEY = b"\x01" * 32
MULTIADDR = "/ip4/127.0.0.1/tcp/4001"
RUN_CONFIG_HASH = b"\x11" * 32
GENESIS_MODEL = b"\x22" * 32
NEXT_MODEL = b"\x33" * 32
LOSS = 2_500_000
ZERO_ADDRESS = "0x" + "00" * 20


@dataclass(frozen=True)
class Params:
    min_miner_stake: int = 100 * TOKEN
    min_validator_stake: int = 200 * TOKEN
    max_permits: int = 8
    commit_duration: int = 60
    score_duration: int = 60
    reveal_duration: int = 60
    audit_duration: int = 60
    challenge_window: int = 60  # a report's voting window (Disputes)
    result_duration: int = 120  # after the audit deadline, a result may be posted until then
    result_window: int = 60  # a posted result's challenge window (Results)
    unbonding_delay: int = 600
    min_class_stake: int = 0  # 0: twice min_validator_stake, as the run config's default
    emission: int = 1000 * TOKEN
    miner_share_bps: int = 7000
    report_bond: int = 10 * TOKEN
    challenge_bond: int = 10 * TOKEN
    slash_bps: int = 5000
    signer_slash_bps: int = 1000
    reporter_share_bps: int = 2000
    absence_rounds: int = 3  # ended rounds in a row without a reveal that retire a validator (Disputes)
    max_reports: int = 16  # reports one validator may file per round (Disputes)
    late_serve_fee: int = 20 * TOKEN  # burned from an accused its voters were served late (Disputes)
    committee: int = 0  # seats of each miner's check committee (ColumnChallenges); 0: no committees


SETTLEMENT_PARTS = ("rounds", "scores", "rewards", "results")


class Settlement:
    """Rounds, Scores, Rewards and Results seen as the one settlement they were split from.

    `settlement.fn(...)` calls `fn` on the first of them (in that order) that defines it;
    `get_logs()` returns the last called contract's logs (with its child calls'). Addresses are
    never ambiguous: `address` is missing, name `.rounds/.scores/.rewards/.results`.
    """

    def __init__(self, rounds, scores, rewards, results):
        self.rounds, self.scores, self.rewards, self.results = rounds, scores, rewards, results
        self._last = rounds
        self._names = {part: function_names(part.capitalize()) for part in SETTLEMENT_PARTS}

    def __getattr__(self, name: str):
        if name.startswith("_") or name in ("address", "compiler_data"):
            raise AttributeError(f"Settlement.{name}: name the contract (rounds, scores, rewards, results)")
        for part in SETTLEMENT_PARTS:
            contract = self.__dict__[part]
            if name in self.__dict__["_names"][part]:
                self._last = contract
                return getattr(contract, name)
        raise AttributeError(f"no settlement contract defines {name!r}")

    def get_logs(self, *args, **kwargs):
        return self._last.get_logs(*args, **kwargs)


@dataclass
class Stack:
    token: object
    staking: object
    keys: object
    settlement: Settlement
    column_challenges: object
    tree_challenges: object
    account_challenges: object
    claims_challenges: object
    disputes: object
    deployer: str
    params: Params
    genesis: int
    run_config_hash: bytes = RUN_CONFIG_HASH

    @property
    def rounds(self):
        return self.settlement.rounds

    @property
    def scores(self):
        return self.settlement.scores

    @property
    def rewards(self):
        return self.settlement.rewards

    @property
    def results(self):
        return self.settlement.results


@functools.cache
def partial(name: str):
    """The compiled contract `name` (e.g. "Staking"), compiled once per process."""
    return boa.load_partial(str(CONTRACTS / f"{name}.vy"))


@functools.cache
def function_names(name: str) -> frozenset:
    """The external functions (getters included) of contract `name`."""
    from vyper.compiler.output import build_abi_output

    abi = build_abi_output(partial(name).compiler_data)
    return frozenset(item["name"] for item in abi if item["type"] == "function")


def deploy_stack(params: Params = Params(), holders: list[str] | None = None, amount: int = 10**6 * TOKEN,
                 token=None, run_config_hash: bytes = RUN_CONFIG_HASH) -> Stack:
    """The eleven contracts deployed and wired in deploy.py's order; `token` replaces the Token
    (it then mints nothing to `holders`, and minter rights are not set)."""
    p = params
    deployer = boa.env.eoa
    holders = holders or [deployer]
    own_token = token is None
    if own_token:
        token = partial("Token").deploy(holders, [amount] * len(holders))
    staking = partial("Staking").deploy(token.address, p.min_miner_stake, p.min_validator_stake, p.max_permits,
                                        p.unbonding_delay, p.min_class_stake or 2 * p.min_validator_stake)
    keys = partial("BlsKeys").deploy(staking.address)
    rounds = partial("Rounds").deploy(staking.address, run_config_hash, GENESIS_MODEL, p.commit_duration,
                                      p.score_duration, p.reveal_duration, p.audit_duration)
    scores = partial("Scores").deploy(rounds.address)
    rewards = partial("Rewards").deploy(token.address, p.emission, p.miner_share_bps)
    results = partial("Results").deploy(rounds.address, rewards.address, staking.address,
                                        p.result_duration, p.result_window, p.signer_slash_bps, p.reporter_share_bps)
    challenge_args = (token.address, rounds.address, scores.address, rewards.address, results.address, p.challenge_bond)
    column = partial("ColumnChallenges").deploy(*challenge_args, p.committee)
    tree = partial("TreeChallenges").deploy(*challenge_args)
    account = partial("AccountChallenges").deploy(*challenge_args)
    claims = partial("ClaimsChallenges").deploy(*challenge_args)
    disputes = partial("Disputes").deploy(token.address, staking.address, rounds.address, rewards.address,
                                          p.report_bond, p.challenge_window, p.slash_bps, p.reporter_share_bps,
                                          p.absence_rounds, p.max_reports, p.late_serve_fee, p.result_duration)
    staking.wire(disputes.address, results.address, keys.address)
    keys.wire(rounds.address)
    rounds.wire(scores.address, rewards.address, results.address, keys.address)
    rewards.wire(disputes.address, results.address)
    results.wire(column.address, tree.address, account.address, claims.address)
    settlement = Settlement(rounds, scores, rewards, results)
    genesis = 0
    if own_token:
        token.set_minter(rewards.address, True)
        token.renounce_ownership()
        genesis = amount * len(holders)
    return Stack(token, staking, keys, settlement, column, tree, account, claims, disputes, deployer, params, genesis, run_config_hash)


def chain_id() -> int:
    return boa.env.evm.patch.chain_id


def join(stack: Stack, role: int, stake: int, funds: int | None = None, classes: int = 0, bonds: bool = True) -> str:
    """A fresh account registered in `role` (with hardware `classes` when not 0), funded, staked
    and approving every bond taker (only the staking contract without `bonds`)."""
    account = boa.env.generate_address()
    stack.token.transfer(account, funds if funds is not None else stake + 100 * TOKEN, sender=stack.deployer)
    with boa.env.prank(account):
        stack.staking.register(role, NODE_KEY, MULTIADDR, SIG)
        if classes:
            stack.staking.set_hardware_classes(classes)
        takers = (stack.disputes, stack.column_challenges, stack.tree_challenges, stack.account_challenges,
                  stack.claims_challenges)
        for spender in (stack.staking, *(takers if bonds else ())):
            stack.token.approve(spender.address, 2**256 - 1)
        if stake:
            stack.staking.stake(stake)
    return account


@functools.cache
def bls_material(i: int) -> tuple[int, bytes]:
    """(secret, EIP-2537 key) of test validator key `i`."""
    sk = bls_keygen(keccak(b"veritrain-test-bls-%d" % i))
    return sk, g1_to_eip2537(bls_public_key(sk))


def bound_pop(sk: int, account: str, keys) -> bytes:  # type: ignore[no-untyped-def]
    """`sk`'s proof of possession for `account` at the `keys` deployment, EIP-2537 encoded."""
    pop = bls_bound_pop_prove(sk, bytes.fromhex(str(account)[2:]), boa.env.evm.patch.chain_id,
                              bytes.fromhex(str(keys.address)[2:]))
    return g2_to_eip2537(pop)


@functools.cache
def signature_of(sk: int, message: bytes) -> bytes:
    return bls_sign(sk, message)


def aggregate_signature(secrets, message: bytes) -> bytes:
    """The EIP-2537 aggregate of `secrets`' signatures of `message`.

    Same-message BLS signatures add up to the signature under the sum of the secrets
    (sum of sk_i * H(m) = (sum of sk_i) * H(m)), so one pure-Python signing (seconds) stands for
    all of them; test_results checks it against `bls_aggregate` of the individual signatures."""
    total = sum(secrets) % curve_order
    if total == 0:
        return g2_to_eip2537(bls_aggregate([signature_of(sk, message) for sk in secrets]))
    return g2_to_eip2537(signature_of(total, message))


def ascending(addresses) -> list:
    return sorted(addresses, key=lambda a: int(str(a), 16))


def seal(blocks: int = 1) -> None:
    """Moves `blocks` blocks on without moving the clock (boa keeps every transaction in one block)."""
    boa.env.time_travel(blocks=blocks, block_delta=0)


def now() -> int:
    return boa.env.evm.patch.timestamp


def fake_block_hash(depth: int) -> bytes:
    return keccak(b"ancestor" + depth.to_bytes(2, "big"))


def expected_blockhash(number: int) -> bytes:
    """What BLOCKHASH(number) returns under the patched ancestor hashes."""
    depth = boa.env.evm.patch.block_number - number - 1
    assert 0 <= depth < 256
    return fake_block_hash(depth)


def expected_seed(closed: int) -> bytes:
    """The seed a round whose commit phase closed in block `closed` stores in this block: the
    closing block's hash mixed with this block's RANDAO (PREVRANDAO)."""
    return keccak(expected_blockhash(closed) + bytes(boa.env.evm.patch.prevrandao))


@pytest.fixture(autouse=True, scope="session")
def _cheap_contract_repr():
    """boa renders `repr(contract)`, a full storage dump, for every reverting call frame; with
    thousands of expected reverts that dominates the run, so show just the name and address."""
    from boa.contracts.vyper.vyper_contract import VyperContract

    original = VyperContract.__repr__
    VyperContract.__repr__ = lambda self: f"<{self.compiler_data.contract_path} at {self.address}>"
    yield
    VyperContract.__repr__ = original


@pytest.fixture(autouse=True, scope="session")
def _deployment_source_map_once():
    """boa assembles a contract's deployment source map (where a constructor's revert points)
    again for every deployment, a third of a contract test's time; it depends on the compiled
    contract alone, so it is kept on the compiled contract and shared by its deployments."""
    from boa.contracts.vyper.vyper_contract import VyperContract

    original = VyperContract.__dict__["_deployment_source_map"]

    def shared(contract):  # type: ignore[no-untyped-def]
        kept = contract.compiler_data.__dict__
        if "veritrain_deployment_source_map" not in kept:
            kept["veritrain_deployment_source_map"] = original.func(contract)
        return kept["veritrain_deployment_source_map"]

    VyperContract._deployment_source_map = property(shared)
    yield
    VyperContract._deployment_source_map = original


@pytest.fixture(autouse=True)
def _isolated_chain():
    """Each test runs on a snapshot; BLOCKHASH returns distinct values for the last 256 blocks."""
    with boa.env.anchor():
        boa.env.evm.patch.prev_hashes = [fake_block_hash(d) for d in range(256)]
        yield


@pytest.fixture
def stack() -> Stack:
    return deploy_stack()


# -- a scripted round ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Posted:
    """A posted result attempt: what `finalize_result`, challenges and `slash_signer` take back."""

    settled: SettledRound | None
    header: list
    non_signers: list
    posted_time: int
    attempt: int

    @property
    def round(self) -> int:
        return int.from_bytes(self.header[4], "big")

    @property
    def root(self) -> bytes:
        return keccak(b"".join(self.header))

    @property
    def non_signers_hash(self) -> bytes:
        return list_hash(self.non_signers)

    def final_args(self) -> tuple:
        return self.header, self.non_signers_hash, self.posted_time, self.attempt


@dataclass
class World:
    """A started stack with funded, staked miners and validators (`secrets`: their BLS keys)."""

    stack: Stack
    miners: list
    validators: list
    secrets: dict = field(default_factory=dict)  # validator -> BLS secret (registered on chain)
    salt: bytes = b"\x05" * 32
    # (round, validator) -> (scores, witness_root, loss, salt) as committed
    vectors: dict = field(default_factory=dict)
    history: dict = field(default_factory=dict)  # account -> PrevEntry of its latest final round
    settled: dict = field(default_factory=dict)  # final round -> SettledRound

    def fork(self) -> World:
        """The same chain objects with fresh Python-side round state (for a test's own anchor)."""
        return World(self.stack, list(self.miners), list(self.validators), dict(self.secrets), self.salt,
                     dict(self.vectors), dict(self.history), dict(self.settled))

    @property
    def s(self):
        return self.stack.settlement

    @property
    def d(self):
        return self.stack.disputes

    @property
    def st(self):
        return self.stack.staking

    @property
    def t(self):
        return self.stack.token

    @property
    def p(self) -> Params:
        return self.stack.params

    # commit phase

    def commit_all(self, rnd: int, miners=None) -> None:
        for m in self.miners if miners is None else miners:
            self.s.commit_update(rnd, keccak(str(m).encode()), b"\xbb" * 32, sender=m)

    def columns(self, rnd: int) -> list:
        """The miners that committed in `rnd`, in column (commit) order."""
        placed = [(self.s.commit_index(rnd, m), m) for m in self.miners]
        return [m for i, m in sorted(placed) if i]

    def to_scoring(self, rnd: int, miners=None) -> list:
        """Commits (all or `miners`, those that have not yet), closes the commit phase, and moves
        to a later block; past the commit phase it only returns the columns."""
        if self.s.phase(rnd) != PHASE_COMMIT:
            if self.s.round_info(rnd)[3] == boa.env.evm.patch.block_number:
                seal()  # the seed is the closing block's hash: score from a later block
            return self.columns(rnd)
        self.commit_all(rnd, [m for m in (self.miners if miners is None else miners) if not self.s.has_committed(rnd, m)])
        if self.s.phase(rnd) == PHASE_COMMIT:
            boa.env.time_travel(seconds=self.p.commit_duration)
            self.s.close_commit(rnd)
        seal()
        return self.columns(rnd)

    # score and reveal phases

    def vector(self, rnd: int, validator, scores, witness_root=None, loss=LOSS, salt=None) -> tuple:
        witness_root = keccak(f"witnesses/{validator}/{rnd}".encode()) if witness_root is None else witness_root
        return list(scores), witness_root, loss, self.salt if salt is None else salt

    def commitment_of(self, rnd: int, validator, scores, witness_root, loss, salt) -> bytes:
        root = vector_root(chain_id(), str(self.stack.scores.address), str(validator), rnd, scores, witness_root, loss)
        return score_commitment(root, salt)

    def commit_scores(self, rnd: int, validator, scores, witness_root=None, loss=LOSS, salt=None) -> None:
        vec = self.vector(rnd, validator, scores, witness_root, loss, salt)
        self.vectors[(rnd, validator)] = vec
        self.s.commit_scores(rnd, self.commitment_of(rnd, validator, *vec), sender=validator)

    def reveal_args(self, rnd: int, validator) -> tuple:
        """(packed scores, witness root, loss, salt) of `validator`'s committed vector."""
        scores, witness_root, loss, salt = self.vectors[(rnd, validator)]
        return pack_segments(scores), witness_root, loss, salt

    def reveal(self, rnd: int, validator) -> None:
        self.s.reveal_scores(rnd, *self.reveal_args(rnd, validator), sender=validator)

    def finish_audits(self, rnd: int) -> None:
        """Every validator that revealed in `rnd` says its audits are done (closes the audit early)."""
        for v in self.s.validators_of(rnd):
            if self.s.revealed(rnd, v) and not self.s.audited(rnd, v) and self.s.phase(rnd) == PHASE_AUDIT:
                self.s.audits_done(rnd, sender=v)

    def to_result(self, rnd: int, scores: dict | None = None, miners=None, wait: bool = False) -> list:
        """Commit, score (every validator in `scores`, default all scoring 1000, in a later block),
        reveal and close the audit of `rnd`; `wait` runs the clock out instead of closing phases early."""
        ordered = self.to_scoring(rnd, miners)
        scores = self.scores_for(rnd) if scores is None else scores
        for v, sc in scores.items():
            self.commit_scores(rnd, v, sc)
        if self.s.phase(rnd) == PHASE_SCORING:
            boa.env.time_travel(seconds=self.p.score_duration)
        for v in scores:
            self.reveal(rnd, v)
        if self.s.phase(rnd) == PHASE_REVEAL:
            boa.env.time_travel(seconds=self.p.reveal_duration)
        if wait:
            boa.env.time_travel(seconds=self.p.audit_duration)
        else:
            self.finish_audits(rnd)
        return ordered

    def scores_for(self, rnd: int, value: int = 1000) -> dict:
        """Every permitted validator of `rnd` scoring every column `value` (call after the commit phase)."""
        n = len(self.columns(rnd))
        return {v: [value] * n for v in self.s.validators_of(rnd)}

    def seated_scores_for(self, rnd: int, value: int = 1000) -> dict:
        """As a validator node scores (call once the seed is stored): `value` for each miner where it
        holds a drawn committee seat (`committees.assignments`), 0 elsewhere."""
        miners = [bytes.fromhex(str(m)[2:]) for m in self.columns(rnd)]
        vals = list(self.s.validators_of(rnd))
        weights = [self.s.validator_weight(rnd, v) for v in vals]
        seated = assignments(bytes(self.s.round_seed(rnd)), miners, weights, self.p.committee)
        return {v: [value if i in mine else 0 for i in range(len(miners))] for v, mine in zip(vals, seated, strict=True)}

    # result

    def inputs(self, rnd: int) -> RoundInputs:
        """Round `rnd`'s chain facts, rebuilt from what this world put on chain (and chain views)."""
        miners = tuple(str(m) for m in self.columns(rnd))
        vals = [str(v) for v in self.s.validators_of(rnd)]
        reveals = {}
        for v in vals:
            if self.s.revealed(rnd, v):
                scores, witness_root, loss, _salt = self.vectors[(rnd, v)]
                reveals[v] = Reveal(tuple(scores), loss, witness_root)
        forfeited = frozenset(a for a in (*miners, *vals) if self.s.forfeited(rnd, a))
        prev = {a: self.history[a] for a in (*miners, *vals) if a in self.history}
        return RoundInputs(
            round=rnd, miners=miners, validators=tuple(vals),
            weights=tuple(self.s.validator_weight(rnd, v) for v in vals), reveals=reveals, forfeited=forfeited,
            prev=prev, emission=self.s.emission_per_round(), miner_share_bps=self.s.miner_share_bps(),
            committee_size=self.p.committee, seed=bytes(self.s.round_seed(rnd)) if self.p.committee else bytes(32))

    def settle(self, rnd: int, model_hash: bytes = NEXT_MODEL, run_config_hash: bytes | None = None) -> SettledRound:
        """The result of `rnd` as an honest validator computes it (the round's own model without quorum)."""
        inputs = self.inputs(rnd)
        run = self.stack.run_config_hash if run_config_hash is None else run_config_hash
        settled = build_result(inputs, chain_id(), str(self.stack.results.address), run, model_hash)
        if not settled.result.quorum:
            settled = build_result(inputs, chain_id(), str(self.stack.results.address), run, self.s.model_hash(rnd))
        return settled

    def sign(self, header: list, signers) -> bytes:
        return aggregate_signature([self.secrets[v] for v in signers], keccak(b"".join(header)))

    def non_signer_args(self, rnd: int, signers) -> tuple[list, list]:
        absent = ascending(v for v in self.s.validators_of(rnd) if v not in set(signers))
        return absent, [self.stack.keys.key_of(v) for v in absent]

    def post(self, rnd: int, settled: SettledRound | None = None, signers=None, header: list | None = None,
             sender=None) -> Posted:
        """Posts `header` (default: `settled`'s, default: the honest result) signed by `signers`
        (default: every keyed validator of the round); the rest are the non-signers."""
        if header is None:
            settled = self.settle(rnd) if settled is None else settled
            header = list(settled.header.words())
        signers = [v for v in self.s.validators_of(rnd) if v in self.secrets] if signers is None else list(signers)
        non_signers, keys = self.non_signer_args(rnd, signers)
        attempt = self.s.rejected_count(rnd) + 1
        self.s.post_result(header, self.sign(header, signers), non_signers, keys,
                           sender=sender or self.stack.deployer)
        return Posted(settled, header, non_signers, now(), attempt)

    def finalize(self, posted: Posted) -> None:
        """Waits out the challenge window and makes `posted` final; records its entries as history."""
        wait = posted.posted_time + self.p.result_window - now()
        if wait > 0:
            boa.env.time_travel(seconds=wait)
        self.s.finalize_result(*posted.final_args())
        self.record(posted.settled)

    def record(self, settled: SettledRound) -> None:
        rnd = settled.inputs.round
        self.settled[rnd] = settled
        for account in (*settled.inputs.miners, *settled.inputs.validators):
            self.history[account] = settled.entry_of(account)

    def run_round(self, rnd: int, scores: dict | None = None, miners=None, finalize: bool = True) -> list:
        """Commit, score (every validator in `scores`, default all scoring 1000), reveal, audit and
        (with `finalize`) post the honest result signed by every keyed validator and make it final."""
        ordered = self.to_result(rnd, scores, miners)
        if finalize:
            self.finalize(self.post(rnd))
        return ordered

    def fall_back(self, rnd: int) -> None:
        """Runs the clock past the result deadline of `rnd` and ends it without a result."""
        wait = self.s.result_deadline(rnd) - now()
        if wait > 0:
            boa.env.time_travel(seconds=wait)
        self.s.fall_back(rnd)

    def claim(self, account, rnd: int) -> int:
        """`account` claims with its leaf and proof of final round `rnd`; returns the amount paid."""
        c = self.settled[rnd].claim_of(str(account))
        return self.s.claim(rnd, c.amount, list(c.proof), sender=account)


def make_world(params: Params = Params(), n_miners: int = 3, validator_stakes=(300 * TOKEN, 200 * TOKEN),
               start: bool = True, bls: bool = False, token=None, run_config_hash: bytes = RUN_CONFIG_HASH,
               miners_bond: bool = True) -> World:
    """A stack with `n_miners` miners at the minimum stake and one validator per stake; with `bls`
    every validator registers its BLS key (one pairing each: prefer `module_world`); without
    `miners_bond` the miners approve only their stake (no reports, challenges or demands: a third
    of the transactions, for worlds of thousands of miners)."""
    funds = n_miners * (params.min_miner_stake + 100 * TOKEN) + sum(s + 100 * TOKEN for s in validator_stakes)
    stack = deploy_stack(params, token=token, run_config_hash=run_config_hash, amount=max(10**6 * TOKEN, funds))
    miners = [join(stack, MINER, params.min_miner_stake, bonds=miners_bond) for _ in range(n_miners)]
    validators = [join(stack, VALIDATOR, s) for s in validator_stakes]
    world = World(stack, miners, validators)
    if bls:
        for i, v in enumerate(validators):
            register_key(world, v, i)
    if start:
        stack.settlement.start()
    return world


def register_key(world: World, validator, i: int) -> None:
    sk, pk = bls_material(i)
    world.stack.keys.register(pk, bound_pop(sk, validator, world.stack.keys), sender=validator)
    world.secrets[validator] = sk


@pytest.fixture
def world() -> World:
    return make_world()


def keyed_world(**kwargs):
    """A module-scoped `kworld_base` fixture: a keyed world (`make_world(bls=True, **kwargs)`)
    deployed once per module; the `kworld` fixture gives each test a `fork()` of it, inside
    the test's own anchor. A module assigns `kworld_base = keyed_world(...)`."""

    @pytest.fixture(scope="module", name="kworld_base")
    def _base():
        with boa.env.anchor():
            boa.env.evm.patch.prev_hashes = [fake_block_hash(d) for d in range(256)]
            yield make_world(bls=True, **kwargs)

    return _base


@pytest.fixture
def kworld(kworld_base) -> World:
    return kworld_base.fork()


def last_logs(contract, name: str | None = None) -> list:
    """Decoded events (own and child calls) of `contract`'s last transaction, optionally by event name."""
    logs = contract.get_logs()
    if name is None:
        return logs
    return [e for e in logs if type(e).__name__ == name]
