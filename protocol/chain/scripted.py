"""A scripted settlement round: real contracts, real transactions, synthetic commitments.

Used by the temporary `veritrain devnet` (until the training nodes exist) and by the
anvil integration test. Miners commit hashes that stand for updates; validators score
them, one miner is reported for a replay mismatch, confirmed by the second validator
and slashed; everyone claims.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field

from eth_account import Account
from eth_account.signers.local import LocalAccount

from protocol.chain.client import ChainClient, Role, Vote
from protocol.chain.commitments import NO_WITNESS, score_commitment, sort_miners
from protocol.config.run_config import TOKEN_UNIT
from protocol.core.fraud import FraudKind
from protocol.core.signing import NodeIdentity, binding_message

Progress = Callable[[str], None]
GAS_FUNDING_WEI = 10**18  # 1 ETH of gas money per node on dev chains


@dataclass
class Participant:
    account: LocalAccount
    identity: NodeIdentity
    client: ChainClient

    @property
    def address(self) -> str:
        return self.account.address


@dataclass
class ScriptedNetwork:
    miners: list[Participant] = field(default_factory=list)
    validators: list[Participant] = field(default_factory=list)
    cheater: str | None = None
    reports: list[int] = field(default_factory=list)


def join_network(deployer: ChainClient, n_miners: int, n_validators: int, progress: Progress,
                 funded: list[LocalAccount] | None = None) -> ScriptedNetwork:
    """Register and stake miner then validator accounts: `funded` ones (already holding gas
    and tokens, miners first), or fresh accounts the deployer funds."""
    cfg = deployer.deployment.run_config.chain
    net = ScriptedNetwork()
    pool = list(funded or [])
    for role, count, stake in ((Role.MINER, n_miners, cfg.min_miner_stake), (Role.VALIDATOR, n_validators, cfg.min_validator_stake)):
        for i in range(count):
            account, identity = (pool.pop(0) if pool else Account.create()), NodeIdentity.generate()
            amount = (stake + 50 * (i + 1)) * TOKEN_UNIT  # distinct stakes give distinct weights
            if funded is None:
                deployer.send_eth(account.address, GAS_FUNDING_WEI)
                deployer.transfer_tokens(account.address, amount + cfg.report_bond * TOKEN_UNIT)
            client = deployer.with_account(account)
            sig = identity.sign(binding_message(deployer.handle.chain_id, bytes.fromhex(deployer.staking.address[2:]),
                                                bytes.fromhex(account.address[2:])))
            client.register(role, identity.public_key, f"/ip4/127.0.0.1/tcp/{4100 + len(net.miners) + len(net.validators)}", sig)
            client.stake(amount)
            (net.miners if role == Role.MINER else net.validators).append(Participant(account, identity, client))
            progress(f"{role.name.lower()} {account.address} registered, staked {amount // TOKEN_UNIT}")
    return net


def play_round(deployer: ChainClient, net: ScriptedNetwork, progress: Progress, cheat: bool = True) -> int:
    """Commit, seed, score, report, reveal, finalize, resolve, attest. Returns the round played."""
    if not deployer.started():
        deployer.start()
    r = deployer.current_round()
    for m in net.miners:
        digest = hashlib.sha256(f"{m.address}/{r}".encode()).digest()
        m.client.commit_update(r, digest, hashlib.sha256(digest).digest())
    progress(f"round {r}: {len(net.miners)} miners committed")
    v0 = net.validators[0].client
    if deployer.round_info(r)["seed"] == b"\x00" * 32:
        v0.store_seed(r)
    miners = sort_miners([m.address for m in net.miners])
    net.cheater = miners[-1] if cheat else None
    scores = {m: (0 if m == net.cheater else 40000 + 5000 * i) for i, m in enumerate(miners)}
    salts, proofs = {}, {}
    for i, v in enumerate(net.validators):
        own = [max(0, scores[m] - 1000 * i) if scores[m] else 0 for m in miners]
        salts[v.address] = (hashlib.sha256(f"{v.address}/{r}".encode()).digest(), own)
        proofs[v.address] = _proofs(v, r, miners, scores)
        v.client.commit_scores(r, score_commitment(deployer.handle.chain_id, deployer.scores.address, v.address, r,
                                                   miners, own, *proofs[v.address], salts[v.address][0]))
    progress(f"round {r}: {len(net.validators)} validators committed scores")
    if net.cheater is not None:
        sig = net.validators[0].identity.sign(b"veritrain/challenge/v1" + r.to_bytes(8, "big"))
        rid = v0.report_fraud(r, net.cheater, FraudKind.REPLAY, 3, hashlib.sha256(b"evidence").digest(), sig)
        for v in net.validators[1:]:
            v.client.vote_fraud(rid, Vote.CONFIRM)
        net.reports.append(rid)
        progress(f"round {r}: report {rid} against {net.cheater} filed and confirmed by peers")
    for v in net.validators:
        v.client.reveal_scores(r, miners, salts[v.address][1], *proofs[v.address], salts[v.address][0])
    for v in net.validators:
        v.client.audits_done(r)
    progress(f"round {r}: scores revealed, audits done")
    if net.cheater is not None:
        deployer.resolve_fraud(net.reports[-1])  # finalize waits for every report of the round
        progress(f"round {r}: report resolved")
    deployer.finalize(r)
    progress(f"round {r}: finalized")
    model = hashlib.sha256(f"model/{r + 1}".encode()).digest()
    for i, v in enumerate(net.validators):
        v.client.attest_model(r + 1, model, 2_500_000 - 10_000 * r + 1000 * i)
    progress(f"round {r + 1}: model attested, round opened")
    return r


def _proofs(v: Participant, r: int, miners: list[str], scores: dict[str, int]) -> tuple[list[bytes], list[bytes]]:
    """Scripted replay witnesses (none for a miner scored 0) and challenge signatures, one per miner."""
    witnesses, sigs = [], []
    for m in miners:
        tag = f"{v.address}/{r}/{m}".encode()
        witnesses.append(hashlib.sha256(b"witness/" + tag).digest() if scores[m] else NO_WITNESS)
        sigs.append(v.identity.sign(b"veritrain/challenge/v1" + tag))
    return witnesses, sigs


def claim_all(net: ScriptedNetwork) -> None:
    for p in [*net.miners, *net.validators]:
        if p.client.call("rewards", "claimable", p.address) > 0:
            p.client.claim()
