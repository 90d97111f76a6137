"""titanoboa fixtures: the seven contracts wired as `veritrain deploy` wires them.

Every test runs inside `boa.env.anchor()` (state, block number, time and the
fake ancestor block hashes are restored afterwards), and the contracts are
compiled once per process with `boa.load_partial`, so a deploy costs seven
CREATEs.

The round settlement is four contracts (Rounds, Scores, Rewards, Attestation);
`Stack.settlement` is a `Settlement` view of the four that sends each call to the
contract defining the function, so the tests name functions, not contracts.
Addresses are never ambiguous: tests name `stack.rounds/scores/rewards/attestation`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path

import boa
import pytest
from eth_abi import encode as abi_encode
from eth_utils import keccak

CONTRACTS = Path(__file__).resolve().parents[2] / "contracts"
SCORE_DOMAIN = keccak(b"veritrain/scores/v1")

MINER, VALIDATOR = 1, 2
TOKEN = 10**18
BPS = 10_000
ONE = 10**18

KIND_REPLAY, KIND_DERIVATION, KIND_UNAVAILABLE, KIND_LAZY = 1, 2, 3, 4
VOTE_CONFIRM, VOTE_REJECT, VOTE_SERVED = 1, 2, 3
STATUS_OPEN, STATUS_CONFIRMED, STATUS_REJECTED, STATUS_VOID = 1, 2, 3, 4
PHASE_NONE, PHASE_COMMIT, PHASE_SCORING, PHASE_REVEAL, PHASE_AUDIT, PHASE_FINALIZE, PHASE_DONE = range(7)

SIG = b"\x02" * 64
NO_WITNESS = b"\x00" * 32
NODE_KEY = b"\x01" * 32
MULTIADDR = "/ip4/127.0.0.1/tcp/4001"


@dataclass(frozen=True)
class Params:
    min_miner_stake: int = 100 * TOKEN
    min_validator_stake: int = 200 * TOKEN
    max_permits: int = 8
    commit_duration: int = 60
    score_duration: int = 60
    reveal_duration: int = 60
    audit_duration: int = 60
    challenge_window: int = 60
    unbonding_delay: int = 600
    emission: int = 1000 * TOKEN
    miner_share_bps: int = 7000
    report_bond: int = 10 * TOKEN
    slash_bps: int = 5000
    reporter_share_bps: int = 2000


SETTLEMENT_PARTS = ("rounds", "scores", "rewards", "attestation")


class Settlement:
    """The four settlement contracts seen as the one they were split from.

    `settlement.fn(...)` calls `fn` on the contract that defines it (Rounds, Scores,
    Rewards or Attestation; names are unique across them except the wiring getters,
    which resolve in that order); `get_logs()` returns the last called contract's logs
    (with its child calls'). `address` is deliberately missing: use `.rounds.address`
    (update commits), `.scores.address` (score commitments) or `.rewards.address`
    (the minter and token holder).
    """

    def __init__(self, rounds, scores, rewards, attestation):
        self.rounds, self.scores, self.rewards, self.attestation = rounds, scores, rewards, attestation
        self._last = rounds
        self._names = {part: function_names(part.capitalize()) for part in SETTLEMENT_PARTS}

    def __getattr__(self, name: str):
        if name.startswith("_") or name in ("address", "compiler_data"):
            raise AttributeError(f"Settlement.{name}: name the contract (rounds, scores, rewards, attestation)")
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
    settlement: Settlement
    disputes: object
    deployer: str
    params: Params
    genesis: int

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
    def attestation(self):
        return self.settlement.attestation


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


def deploy_settlement(token, staking, run_config_hash, genesis_model_hash, commit_duration, score_duration,
                      reveal_duration, emission, miner_share_bps, audit_duration=60) -> Settlement:
    """Deploys Rounds, Scores, Rewards and Attestation (the old Settlement constructor's
    arguments, in its order, then the audit duration) and wires them to each other; the
    disputes contract and the token's minter are left to the caller."""
    rounds = (partial("Rounds").deploy(
        staking, run_config_hash, genesis_model_hash, commit_duration, score_duration, reveal_duration, audit_duration))
    scores = (partial("Scores").deploy(rounds.address))
    rewards = (partial("Rewards").deploy(
        token, rounds.address, scores.address, emission, miner_share_bps))
    attestation = (partial("Attestation").deploy(rounds.address))
    rounds.wire(scores.address, rewards.address, attestation.address)
    scores.wire(rewards.address)
    return Settlement(rounds, scores, rewards, attestation)


def deploy_stack(params: Params = Params(), holders: list[str] | None = None, amount: int = 10**6 * TOKEN,
                 token=None) -> Stack:
    """The seven contracts wired as `veritrain deploy` wires them; `token` replaces the
    Token (it then mints nothing to `holders`, and minter rights are not set)."""
    deployer = boa.env.eoa
    holders = holders or [deployer]
    own_token = token is None
    if own_token:
        token = partial("Token").deploy(holders, [amount] * len(holders))
    staking = partial("Staking").deploy(
        token.address, params.min_miner_stake, params.min_validator_stake, params.max_permits, params.unbonding_delay,
    )
    settlement = deploy_settlement(
        token.address, staking.address, b"\x11" * 32, b"\x22" * 32,
        params.commit_duration, params.score_duration, params.reveal_duration, params.emission,
        params.miner_share_bps, params.audit_duration,
    )
    disputes = partial("Disputes").deploy(
        token.address, staking.address, settlement.rounds.address, settlement.rewards.address,
        params.report_bond, params.challenge_window, params.slash_bps, params.reporter_share_bps,
    )
    staking.wire(settlement.rounds.address, disputes.address)
    settlement.rewards.set_disputes(disputes.address)
    if not own_token:
        return Stack(token, staking, settlement, disputes, deployer, params, 0)
    token.set_minter(settlement.rewards.address, True)
    token.renounce_ownership()
    return Stack(token, staking, settlement, disputes, deployer, params, amount * len(holders))


def chain_id() -> int:
    return boa.env.evm.patch.chain_id


def score_commitment(chain_id: int, settlement: str, validator: str, rnd: int, miners, scores, witnesses, sigs,
                     salt: bytes) -> bytes:
    """The reveal commitment, encoded here independently of protocol.chain.commitments."""
    encoded = abi_encode(
        ["bytes32", "uint256", "address", "address", "uint256", "address[]", "uint16[]", "bytes32[]", "bytes",
         "bytes32"],
        [SCORE_DOMAIN, chain_id, str(settlement), str(validator), rnd, [str(m) for m in miners], list(scores),
         list(witnesses), b"".join(sigs), salt],
    )
    return keccak(encoded)


def witness_of(validator, miner, score: int) -> bytes:
    """A stand-in replay witness: zero when the miner scored 0 (no check passed)."""
    return keccak(f"witness/{validator}/{miner}".encode()) if score else NO_WITNESS


def proofs_for(validator, miners, scores) -> tuple[list, list]:
    """Stand-in witnesses and challenge signatures (one 64-byte sig per miner)."""
    witnesses = [witness_of(validator, m, s) for m, s in zip(miners, scores, strict=True)]
    sigs = [keccak(f"sig/{validator}/{m}".encode()) * 2 for m in miners]
    return witnesses, sigs


def join(stack: Stack, role: int, stake: int, funds: int | None = None) -> str:
    account = boa.env.generate_address()
    stack.token.transfer(account, funds if funds is not None else stake + 100 * TOKEN, sender=stack.deployer)
    with boa.env.prank(account):
        stack.staking.register(role, NODE_KEY, MULTIADDR, SIG)
        stack.token.approve(stack.staking.address, 2**256 - 1)
        stack.token.approve(stack.disputes.address, 2**256 - 1)
        if stake:
            stack.staking.stake(stake)
    return account


def ascending(addresses) -> list:
    return sorted(addresses, key=lambda a: int(str(a), 16))


def seal(blocks: int = 1) -> None:
    """Moves `blocks` blocks on without moving the clock (boa keeps every transaction in one block)."""
    boa.env.time_travel(blocks=blocks, block_delta=0)


def fake_block_hash(depth: int) -> bytes:
    return keccak(b"ancestor" + depth.to_bytes(2, "big"))


def expected_blockhash(number: int) -> bytes:
    """What BLOCKHASH(number) returns under the patched ancestor hashes."""
    depth = boa.env.evm.patch.block_number - number - 1
    assert 0 <= depth < 256
    return fake_block_hash(depth)


@pytest.fixture(autouse=True, scope="session")
def _cheap_contract_repr():
    """boa renders `repr(contract)`, a full storage dump, for every reverting call frame; with
    thousands of expected reverts that dominates the run, so show just the name and address."""
    from boa.contracts.vyper.vyper_contract import VyperContract

    original = VyperContract.__repr__
    VyperContract.__repr__ = lambda self: f"<{self.compiler_data.contract_path} at {self.address}>"
    yield
    VyperContract.__repr__ = original


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


def weighted_median_ref(scores, weights) -> int:
    """Largest score w with sum(weights of scores >= w) * 2 > total weight (a strict majority);
    0 without scores or weight."""
    total = sum(weights)
    if total == 0:
        return 0
    best = 0
    for w in set(scores):
        support = sum(wt for s, wt in zip(scores, weights, strict=True) if s >= w)
        if support * 2 > total and w > best:
            best = w
    return best


def settle_ref(params: Params, weights: dict, scores: dict, miners: list, held=(), forfeited=(), total_weight=None):
    """Python model of `finalize`: consensus, miner rewards, validator rewards and agreements.

    `weights`/`scores` are keyed by revealed validator (scores in `miners` order); `total_weight`
    is the round's permitted weight (default: the revealed weight, so the quorum holds).
    Forfeited accounts (confirmed cheats or lazy validators) get 0: a forfeited miner counts as
    consensus 0, a forfeited validator has no share. Without the quorum (revealed weight * 3 <=
    total * 2) the round takes the fallback: consensus 0, no miner reward, validators by stake.
    Returns (consensus, miner_reward, validator_reward, agreement) with dicts keyed by address.
    """
    vals = list(scores)
    total_weight = sum(weights[v] for v in vals) if total_weight is None else total_weight
    quorum = sum(weights[v] for v in vals) * 3 > total_weight * 2
    cons = [0 if not quorum or m in forfeited else
            weighted_median_ref([scores[v][i] for v in vals], [weights[v] for v in vals])
            for i, m in enumerate(miners)]
    consensus = dict(zip(miners, cons, strict=True))
    miner_reward = {m: 0 for m in miners}
    val_reward = {v: 0 for v in vals}
    agreement = {}
    if not vals or not miners:
        return consensus, miner_reward, val_reward, agreement
    pool = params.emission * params.miner_share_bps // BPS
    total = sum(cons)
    for m, c in zip(miners, cons, strict=True):
        miner_reward[m] = 0 if total == 0 or m in forfeited else pool * c // total
    vpool = params.emission - pool
    shares = {}
    for v in vals:
        low = sum(min(s, c) for s, c in zip(scores[v], cons, strict=True))
        high = sum(max(s, c) for s, c in zip(scores[v], cons, strict=True))
        agreement[v] = ONE if high == 0 or not quorum else low * ONE // high
        shares[v] = 0 if v in forfeited else weights[v] * agreement[v]
    total_share = sum(shares.values())
    for v in vals:
        val_reward[v] = 0 if total_share == 0 else vpool * shares[v] // total_share
    return consensus, miner_reward, val_reward, agreement


@dataclass
class World:
    """A started stack with funded, staked miners and validators."""

    stack: Stack
    miners: list
    validators: list
    salt: bytes = b"\x05" * 32
    scores: dict = field(default_factory=dict)

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

    def commit_all(self, rnd: int, miners=None) -> None:
        for m in self.miners if miners is None else miners:
            self.s.commit_update(rnd, keccak(str(m).encode()), b"\xbb" * 32, sender=m)

    def commitment(self, rnd: int, validator, miners, scores, salt=None, witnesses=None, sigs=None) -> bytes:
        w, g = proofs_for(validator, miners, scores)
        return score_commitment(chain_id(), self.stack.scores.address, validator, rnd, miners, scores,
                                w if witnesses is None else witnesses, g if sigs is None else sigs, salt or self.salt)

    def commit_scores(self, rnd: int, validator, scores, miners=None) -> None:
        miners = ascending(self.committed(rnd)) if miners is None else miners
        self.scores[(rnd, validator)] = (list(miners), list(scores))
        self.s.commit_scores(rnd, self.commitment(rnd, validator, miners, scores), sender=validator)

    def reveal_args(self, rnd: int, validator) -> tuple:
        """(miners, scores, witnesses, packed sigs, salt) of `validator`'s committed reveal."""
        miners, scores = self.scores[(rnd, validator)]
        witnesses, sigs = proofs_for(validator, miners, scores)
        return miners, scores, witnesses, b"".join(sigs), self.salt

    def sig_of(self, rnd: int, validator, index: int) -> bytes:
        """`validator`'s revealed challenge signature for miner `index` of round `rnd`."""
        miners, scores = self.scores[(rnd, validator)]
        return proofs_for(validator, miners, scores)[1][index]

    def reveal(self, rnd: int, validator) -> None:
        self.s.reveal_scores(rnd, *self.reveal_args(rnd, validator), sender=validator)

    def finish_audits(self, rnd: int) -> None:
        """Every validator that revealed in `rnd` says its audits are done (closes the audit early)."""
        for v in self.s.revealed_validators_of(rnd):
            if self.s.phase(rnd) == PHASE_AUDIT:
                self.s.audits_done(rnd, sender=v)

    def committed(self, rnd: int) -> list:
        return [m for m in self.miners if self.s.has_committed(rnd, m)]

    def to_scoring(self, rnd: int, miners=None) -> list:
        """Commits (all or `miners`), closes the commit phase, and moves to a later block."""
        self.commit_all(rnd, miners)
        if self.s.phase(rnd) == PHASE_COMMIT:
            boa.env.time_travel(seconds=self.stack.params.commit_duration)
            self.s.close_commit(rnd)
        seal()
        return ascending(self.committed(rnd))

    def run_round(self, rnd: int, scores: dict, miners=None, finalize: bool = True) -> list:
        """Commit, score (every validator in `scores`), reveal, and finalize `rnd`."""
        ordered = self.to_scoring(rnd, miners)
        for v, sc in scores.items():
            self.commit_scores(rnd, v, sc, ordered)
        if self.s.phase(rnd) == PHASE_SCORING:
            boa.env.time_travel(seconds=self.stack.params.score_duration)
        for v in scores:
            self.reveal(rnd, v)
        if self.s.phase(rnd) == PHASE_REVEAL:
            boa.env.time_travel(seconds=self.stack.params.reveal_duration)
        self.finish_audits(rnd)
        if finalize:
            self.s.finalize(rnd)
        return ordered

    def attest(self, rnd: int, model_hash: bytes = b"\x33" * 32, loss: int = 2_500_000) -> None:
        """Every permitted validator of `rnd - 1` attests until the next round opens."""
        for v in self.s.validators_of(rnd - 1):
            if self.s.current_round() == rnd:
                return
            self.s.attest_model(rnd, model_hash, loss, sender=v)


def make_world(params: Params = Params(), n_miners: int = 3, validator_stakes=(300 * TOKEN, 200 * TOKEN),
               start: bool = True) -> World:
    stack = deploy_stack(params)
    miners = [join(stack, MINER, params.min_miner_stake) for _ in range(n_miners)]
    validators = [join(stack, VALIDATOR, s) for s in validator_stakes]
    if start:
        stack.settlement.start()
    return World(stack, miners, validators)


@pytest.fixture
def world() -> World:
    return make_world()


def last_logs(contract, name: str | None = None) -> list:
    """Decoded events (own and child calls) of `contract`'s last transaction, optionally by event name."""
    logs = contract.get_logs()
    if name is None:
        return logs
    return [e for e in logs if type(e).__name__ == name]
