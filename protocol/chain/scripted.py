"""A scripted settlement round: real contracts, real transactions, synthetic commitments.

Used by the gas benchmark and the anvil integration test. Miners commit hashes that stand
for updates; validators score them, one miner is reported for a replay mismatch, confirmed
by the other validators and slashed; the result is computed from chain data, signed with
BLS by every validator, posted, left unchallenged through its window and made final;
everyone claims with a Merkle proof built from chain data.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field

from eth_account import Account
from eth_account.signers.local import LocalAccount

from protocol.chain.backend import advance_time
from protocol.chain.bls_registration import aggregate_keys, registration
from protocol.chain.challenge_args import (
    answered_entries_arg,
    claims_arg,
    claims_chunk_arg,
    column_args,
    leaf_answer_args,
)
from protocol.chain.claims import claim_owed
from protocol.chain.client import ChainClient, Role, Vote
from protocol.chain.registration import register_node
from protocol.chain.settlement_history import SettlementHistory
from protocol.config.run_config import TOKEN_UNIT
from protocol.core.crypto.bls import (
    bls_aggregate,
    bls_keygen,
    bls_sign,
    g2_to_eip2537,
)
from protocol.core.crypto.keccak import keccak256
from protocol.core.crypto.signing import NodeIdentity
from protocol.core.settlement.abi_words import list_hash
from protocol.core.settlement.committees import assignments
from protocol.core.settlement.fraud import FraudKind
from protocol.core.settlement.result_header import SettledRound
from protocol.core.settlement.score_vector import pack_segments, score_commitment, vector_root

Progress = Callable[[str], None]
GAS_FUNDING_WEI = 10**18  # 1 ETH of gas money per node on dev chains
LOSS_MICRO = 2_500_000  # a scripted held-out loss, 1e6 = 1.0


@dataclass
class Participant:
    account: LocalAccount
    identity: NodeIdentity
    client: ChainClient
    bls_secret: int | None = None  # validators only

    @property
    def address(self) -> str:
        return self.account.address


@dataclass
class ScriptedNetwork:
    miners: list[Participant] = field(default_factory=list)
    validators: list[Participant] = field(default_factory=list)
    cheater: str | None = None
    reports: list[int] = field(default_factory=list)
    gas: dict[str, list[int]] = field(default_factory=dict)  # action -> gas of each transaction

    def record(self, action: str, receipt: dict) -> dict:
        self.gas.setdefault(action, []).append(int(receipt["gasUsed"]))
        return receipt


def join_network(deployer: ChainClient, n_miners: int, n_validators: int, progress: Progress,
                 funded: list[LocalAccount] | None = None) -> ScriptedNetwork:
    """Register and stake miner then validator accounts (validators also register a BLS key):
    `funded` ones (already holding gas and tokens, miners first), or fresh accounts the deployer funds."""
    cfg = deployer.deployment.run_config.chain
    net = ScriptedNetwork()
    pool = list(funded or [])
    for role, count, stake in ((Role.MINER, n_miners, cfg.min_miner_stake), (Role.VALIDATOR, n_validators, cfg.min_validator_stake)):
        for i in range(count):
            account, identity = (pool.pop(0) if pool else Account.create()), NodeIdentity.generate()
            amount = (stake + 50 * (i + 1)) * TOKEN_UNIT  # distinct stakes give distinct weights
            if funded is None:
                deployer.send_eth(account.address, GAS_FUNDING_WEI)
                # a report's bond is report_bond per other validator
                bond = max(cfg.report_bond * max(n_validators - 1, 1), cfg.challenge_bond)
                deployer.transfer_tokens(account.address, amount + bond * TOKEN_UNIT)
            client = deployer.with_account(account)
            register_node(client, role, identity, f"/ip4/127.0.0.1/tcp/{4100 + len(net.miners) + len(net.validators)}")
            client.stake(amount)
            member = Participant(account, identity, client)
            if role == Role.VALIDATOR:
                member.bls_secret = bls_keygen(identity.seed + b"/bls")
                net.record("register_bls", client.register_bls(*registration(client, member.bls_secret)))
            (net.miners if role == Role.MINER else net.validators).append(member)
            progress(f"{role.name.lower()} {account.address} registered, staked {amount // TOKEN_UNIT}")
    return net


def play_round(deployer: ChainClient, net: ScriptedNetwork, progress: Progress, cheat: bool = True,
               signers: int | None = None, challenge_column: int | None = None) -> int:
    """Commit, seed, score, report, reveal, audit, resolve, post the result signed by the first
    `signers` validators (all by default), wait out its window and make it final."""
    r = play_to_result(deployer, net, progress, cheat)
    post_and_finalize(deployer, net, r, hashlib.sha256(f"model/{r + 1}".encode()).digest(), signers, challenge_column)
    progress(f"round {r}: result final, round {r + 1} open")
    return r


def seats_of(client: ChainClient, r: int, columns: list[str]) -> dict[str, set[int]]:
    """Per validator of round `r`, the columns it checks (`committees.assignments`: its drawn seats,
    or every column with no committee in force)."""
    validators = client.validators_of(r)
    weights = list(client.read.rounds.weights_of(r, validators))
    size = client.deployment.run_config.chain.committee
    seed = bytes(client.round_info(r)["seed"])
    mine = assignments(seed, [bytes.fromhex(m[2:]) for m in columns], weights, size)
    return dict(zip(validators, mine, strict=True))


def play_to_result(deployer: ChainClient, net: ScriptedNetwork, progress: Progress, cheat: bool = True) -> int:
    """A round up to its result: commit, seed, score, report, reveal, audit, resolve."""
    if not deployer.started():
        deployer.start()
    r = deployer.current_round()
    for i, m in enumerate(net.miners):
        digest = hashlib.sha256(f"{m.address}/{r}".encode()).digest()
        steps = 30 - 3 * (i % 3)  # capacity-scaled work: H, H - k, H - 2k of the default H = 30, k = 3
        net.record("commit_update", m.client.commit_update(r, digest, hashlib.sha256(digest).digest(), steps))
    progress(f"round {r}: {len(net.miners)} miners committed")
    v0 = net.validators[0].client
    if deployer.round_info(r)["seed"] == b"\x00" * 32:
        net.record("store_seed", v0.store_seed(r))
    columns = [m.address for m in net.miners]  # commit order
    net.cheater = columns[-1] if cheat else None
    scores = {m: (0 if m == net.cheater else 40000 + 5000 * i) % 65536 for i, m in enumerate(columns)}
    seats = seats_of(deployer, r, columns)
    reveals = {}
    for i, v in enumerate(net.validators):
        # as a validator node: a score for each miner where it holds a drawn seat, 0 elsewhere
        own = [max(0, scores[m] - 1000 * i) if scores[m] and c in seats[v.address] else 0
               for c, m in enumerate(columns)]
        salt = hashlib.sha256(f"{v.address}/{r}".encode()).digest()
        witness_root = hashlib.sha256(f"witnesses/{v.address}/{r}".encode()).digest()
        loss = LOSS_MICRO - 10_000 * r + 1000 * i
        root = vector_root(deployer.handle.chain_id, deployer.scores.address, v.address, r, own, witness_root, loss)
        net.record("commit_scores", v.client.commit_scores(r, score_commitment(root, salt)))
        reveals[v.address] = (pack_segments(own), witness_root, loss, salt)
    progress(f"round {r}: {len(net.validators)} validators committed scores")
    if net.cheater is not None:
        sig = net.validators[0].identity.sign(b"veritrain/challenge/v1" + r.to_bytes(8, "big"))
        rid = v0.report_fraud(r, net.cheater, FraudKind.REPLAY, 3, hashlib.sha256(b"evidence").digest(), sig)
        for v in net.validators[1:]:
            net.record("vote_fraud", v.client.vote_fraud(rid, Vote.CONFIRM))
        net.reports.append(rid)
        progress(f"round {r}: report {rid} against {net.cheater} filed and confirmed by peers")
    for v in net.validators:
        net.record("reveal_scores", v.client.reveal_scores(r, *reveals[v.address]))
    for v in net.validators:
        net.record("audits_done", v.client.audits_done(r))
    progress(f"round {r}: scores revealed, audits done")
    if net.cheater is not None:
        net.record("resolve_fraud", deployer.resolve_fraud(net.reports[-1]))  # results wait for every report
        progress(f"round {r}: report resolved")
    return r


def post_and_finalize(deployer: ChainClient, net: ScriptedNetwork, r: int, model_hash: bytes,
                      signers: int | None = None, challenge_column: int | None = None) -> None:
    """Compute round `r`'s result from chain data, post it signed by the first `signers`
    validators (a miner demands column `challenge_column`, the entries and the claims of the
    right root, if given, and a signer answers them; then the miner challenges that column and
    loses its bond), wait out the challenge window, make it final and settle the demands."""
    history = SettlementHistory(deployer)
    settled = history.settle(r, model_hash)
    if not settled.result.quorum:  # without the quorum the model stays as it was
        settled = history.settle(r, deployer.read.rounds.model_hash(r))
    posted_time, attempt, non_signers = post_signed(deployer, net, r, list(settled.header.words()), signers)
    if challenge_column is not None:
        demand_and_answer(deployer, net, settled, (r, list(settled.header.words()), list_hash(non_signers),
                                                   posted_time, attempt), challenge_column)
        challenger = net.miners[0].client
        bond = deployer.read.column_challenges.challenge_bond()
        challenger.approve(deployer.column_challenges.address, bond)
        net.record("challenge_column", challenger.challenge("column_challenges", "challenge_column", r,
                                                            list(settled.header.words()), list_hash(non_signers),
                                                            posted_time, attempt,
                                                            *column_args(settled, challenge_column)))
    advance_time(deployer.handle, deployer.deployment.run_config.chain.result_challenge_window)
    net.record("finalize_result", deployer.finalize_result(list(settled.header.words()), list_hash(non_signers), posted_time, attempt))
    if challenge_column is not None:  # each demand's bond now pays its answerer
        for position in (challenge_column, settled.inputs.n + 1, settled.inputs.n + 2,
                         settled.inputs.n + 3):
            net.record("settle_demand", net.validators[0].client.challenge("tree_challenges", "settle_demand",
                                                                          r, attempt, position))


def post_signed(deployer: ChainClient, net: ScriptedNetwork, r: int, header: list[bytes],
                signers: int | None = None) -> tuple[int, int, list[str]]:
    """Post `header` (right or not) signed by the first `signers` validators (all by default):
    (posted time, attempt, non-signers)."""
    root = keccak256(b"".join(header))
    signing = net.validators[:signers] if signers is not None else net.validators
    signature = bls_aggregate([bls_sign(v.bls_secret, root) for v in signing if v.bls_secret is not None])
    absent = sorted((v for v in net.validators if v not in signing), key=lambda v: int(v.address, 16))
    non_signers = [v.address for v in absent]
    keys = aggregate_keys(deployer, r, non_signers)
    receipt = net.record("post_result", net.validators[0].client.post_result(header, g2_to_eip2537(signature),
                                                                            non_signers, keys))
    posted_time = int(deployer.w3.eth.get_block(receipt["blockNumber"])["timestamp"])
    return posted_time, deployer.read.results.rejected_count(r) + 1, non_signers


def claim_all(net: ScriptedNetwork) -> None:
    """Every participant claims everything it earned, with a proof built from chain data."""
    history = SettlementHistory(net.validators[0].client)
    for p in [*net.miners, *net.validators]:
        holder = p.client.token_balance(p.address) > 0  # a new holder pays ERC-20's fresh slot
        claimed = claim_owed(p.client, history)
        if claimed is not None:
            net.record("claim" if holder else "claim_new_holder", claimed[1])


def demand_and_answer(deployer: ChainClient, net: ScriptedNetwork, settled: SettledRound, attempt: tuple,
                      column: int) -> None:
    """A miner demands column `column`, the validator entries, the claims summaries and the first
    claims chunk of the pending
    attempt (its five arguments) and the first validator answers each from its own result,
    taking the bonds (docs/PROTOCOL.md §11.9, Demands)."""
    demander, answerer, n = net.miners[0].client, net.validators[0].client, settled.inputs.n
    bond = deployer.read.tree_challenges.challenge_bond()
    deployer.transfer_tokens(demander.address, 4 * bond)  # its bonds: a miner holds only what it earned
    demander.approve(deployer.tree_challenges.address, 4 * bond)
    net.record("demand", demander.challenge("tree_challenges", "demand", *attempt, [column]))
    net.record("answer_leaf", answerer.challenge("tree_challenges", "answer_leaf", *attempt,
                                                 *leaf_answer_args(settled, column)))
    demander.challenge("tree_challenges", "demand", *attempt, [n + 1])
    net.record("answer_validators", answerer.challenge("tree_challenges", "answer_validators", *attempt,
                                                       answered_entries_arg(settled)))
    demander.challenge("tree_challenges", "demand", *attempt, [n + 2])
    net.record("answer_claims", answerer.challenge("tree_challenges", "answer_claims", *attempt,
                                                   claims_arg(settled)))
    demander.challenge("tree_challenges", "demand", *attempt, [n + 3])
    net.record("answer_claims_chunk", answerer.challenge("tree_challenges", "answer_claims_chunk", *attempt,
                                                         *claims_chunk_arg(settled, 0)))
