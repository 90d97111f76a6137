"""Trust rows for reports and leaf demands (DESIGN §8.1 rules 5 and 7), measured through the real
contracts: deployed by `protocol.chain.deploy` on the embedded chain (eth-tester, as the devnet
deploys them), nodes joined and a round played by `protocol.chain.scripted`, and every figure read
back from the chain as a token balance or a stake.

- leaf demand spam: a miner demands leaves of the honest posted root of round 1, one by one, and
  a signer answers each (`demand`, `answer_leaf`); the demander's balance falls by the bond
  a demand, the answerer's rises by it, and the account's cap refuses the demand after the 8th.
- a false report: in round 2 validator 0 reports an honest miner (`report_fraud`, a replay
  report), the other validators vote it false (`vote_fraud`, reject) and it is resolved
  (`resolve_fraud`): its filer's balance falls by `report_bond` per other voter (burned).
- late serve: validator 0 files an `unavailable` report against another miner, the others vote
  `served` (they got the checkpoint only on a retry): the report is void, the accused's stake
  falls by `late_serve_fee` (burned) and the filer's bond comes back.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, replace
from fractions import Fraction
from typing import Any

from benchmarks.trust import Params, Row, blocked
from protocol.chain.backend import advance_time, connect, dev_account
from protocol.chain.challenge_args import leaf_answer_args
from protocol.chain.client import ChainClient, Vote
from protocol.chain.deploy import deploy
from protocol.chain.scripted import (
    Participant,
    ScriptedNetwork,
    join_network,
    play_to_result,
    post_signed,
)
from protocol.chain.settlement_history import SettlementHistory
from protocol.config.run_config import TOKEN_UNIT, ChainParams, RunConfig
from protocol.core.errors import ContractRevert
from protocol.core.settlement.abi_words import list_hash
from protocol.core.settlement.fraud import FraudKind

# the figures do not depend on the miner count: with 16 columns the 17th demand (the root
# preimage) can only be refused by the per-account cap of 16
DEMAND_MINERS = 24
MAX_DEMANDS = 24  # result_demands.vy: demands one account may make per round
HOUR = 3600
REJECTED, VOID = 3, 4  # Disputes' STATUS_REJECTED, STATUS_VOID


@dataclass(frozen=True)
class Resolved:
    """A report's end, read from the chain, in tokens."""

    status: int  # Disputes' status: 3 rejected, 4 void
    filer_change: Fraction  # the filer's balance change from filing to resolution
    accused_stake_change: Fraction  # the accused's stake change over the same span


@dataclass(frozen=True)
class Measured:
    """What the chain showed, in tokens."""

    demands_made: int  # demands the cap let one account make in a round
    refused: str  # the revert of the next one
    demand_change: Fraction  # the demander's balance change per answered demand
    answer_change: Fraction  # the answerer's, per answer
    false_report: Resolved  # an honest miner reported, the others voting reject
    late_serve: Resolved  # an unavailable report the others voted `served` (late)

    def as_json(self) -> dict[str, Any]:
        def plain(d: dict[str, Any]) -> dict[str, Any]:
            return {k: plain(v) if isinstance(v, dict) else float(v) if isinstance(v, Fraction) else v
                    for k, v in d.items()}

        return plain(asdict(self))


def _tokens(wei: int) -> Fraction:
    return Fraction(wei, TOKEN_UNIT)


def _chain() -> ChainClient:
    """The default run's contracts on a fresh embedded chain. Only times change: eth-tester stamps
    blocks with the wall clock, so the windows are long enough for a loaded machine; every bond,
    fee and stake is the default's."""
    chain = ChainParams(commit_duration=HOUR, score_duration=HOUR, reveal_duration=HOUR, audit_duration=HOUR,
                        result_duration=2 * HOUR, result_challenge_window=2 * HOUR, unbonding_delay=20 * HOUR)
    handle = connect(None)
    deployer = dev_account(handle)
    return ChainClient(handle, deploy(handle, deployer, RunConfig(chain=chain)), deployer)


def _demand_spam(client: ChainClient, net: ScriptedNetwork) -> tuple[int, str, Fraction, Fraction]:
    """Round 1 played honestly and its (right) result posted; the last miner demands one position
    of the pending attempt after another and validator 0 (a signer: it holds the tree) answers
    each, until a demand is refused. Then the attempt is made final, which opens round 2, and
    each demand is settled: its bond pays the answerer."""
    client.start()
    r = play_to_result(client, net, lambda _m: None, cheat=False)
    settled = SettlementHistory(client).settle(r, hashlib.sha256(b"model/2").digest())
    header = list(settled.header.words())
    posted_time, attempt, non_signers = post_signed(client, net, r, header)
    args = (r, header, list_hash(non_signers), posted_time, attempt)
    demander, answerer, n = net.miners[-1], net.validators[0], settled.inputs.n
    bond = client.read.tree_challenges.challenge_bond()
    client.transfer_tokens(demander.address, (n + 1) * bond)  # it can pay for every position
    demander.client.approve(client.tree_challenges.address, (n + 1) * bond)
    before = [client.token_balance(a) for a in (demander.address, answerer.address)]
    made, refused = 0, ""
    for position in range(n):  # the leaves; the root preimage (n) is the 9th demand's
        demander.client.challenge("tree_challenges", "demand", *args, [position])
        answerer.client.challenge("tree_challenges", "answer_leaf", *args, *leaf_answer_args(settled, position))
        made += 1
    try:
        demander.client.challenge("tree_challenges", "demand", *args, [n])
    except ContractRevert as exc:
        refused = exc.reason
    advance_time(client.handle, client.deployment.run_config.chain.result_challenge_window)
    client.finalize_result(header, list_hash(non_signers), posted_time, attempt)
    for position in range(made):  # each bond pays its answerer once the root is final
        client.challenge("tree_challenges", "settle_demand", r, attempt, position)
    after = [client.token_balance(a) for a in (demander.address, answerer.address)]
    return made, refused, _tokens(after[0] - before[0]) / made, _tokens(after[1] - before[1]) / made


def _report(client: ChainClient, net: ScriptedNetwork, accused: Participant, kind: FraudKind, vote: Vote) -> Resolved:
    """Validator 0 (the lightest: the others outweigh it) reports `accused` in the current round;
    the others vote `vote`, so every voter has voted and it resolves at once."""
    r, filer = client.current_round(), net.validators[0]
    balance, stake = client.token_balance(filer.address), client.call("staking", "staked", accused.address)
    sig = filer.identity.sign(b"veritrain/challenge/v1" + r.to_bytes(8, "big"))
    rid = filer.client.report_fraud(r, accused.address, kind, 3, hashlib.sha256(b"evidence").digest(), sig)
    for v in net.validators[1:]:
        v.client.vote_fraud(rid, vote)
    filer.client.resolve_fraud(rid)
    return Resolved(int(client.report(rid)["status"]), _tokens(client.token_balance(filer.address) - balance),
                    _tokens(client.call("staking", "staked", accused.address) - stake))


def _commit_all(client: ChainClient, net: ScriptedNetwork) -> None:
    """Every miner commits in the current round: the commit phase closes and reporting opens."""
    r = client.current_round()
    for m in net.miners:
        digest = hashlib.sha256(f"{m.address}/{r}".encode()).digest()
        m.client.commit_update(r, digest, hashlib.sha256(digest).digest(), 30)


def measure(validators: int) -> Measured:
    """One chain: `validators` validators (the devnet's 3 by default) and DEMAND_MINERS miners.
    Round 1: the demands; round 2: the two reports, each against an honest miner."""
    client = _chain()
    net = join_network(client, DEMAND_MINERS, validators, lambda _m: None)
    made, refused, demand, answer = _demand_spam(client, net)
    _commit_all(client, net)
    false_report = _report(client, net, net.miners[0], FraudKind.REPLAY, Vote.REJECT)
    late_serve = _report(client, net, net.miners[1], FraudKind.UNAVAILABLE, Vote.SERVED)
    return Measured(made, refused, demand, answer, false_report, late_serve)


def report_rows(p: Params, m: Measured) -> list[Row]:
    """The three rows, each loss as the chain showed it; a rule the chain did not keep raises."""
    others = max(p.validators - 1, 1)
    recheck = p.reward / p.n_segments * others  # each other voter re-checks one segment
    burned = -m.false_report.filer_change
    if m.false_report.status != REJECTED or burned <= recheck:
        raise AssertionError(f"a false report cost its filer {burned} (status {m.false_report.status}), "
                             f"not more than the {recheck} its voters' re-checks cost")
    late = m.late_serve
    if late.status != VOID or late.filer_change != 0 or late.accused_stake_change >= 0:
        raise AssertionError(f"a report voted served late did not fine the accused and return the bond: {late}")
    if m.demands_made != MAX_DEMANDS or "demand cap" not in m.refused or m.demand_change >= 0:
        raise AssertionError(f"leaf demands: {m.demands_made} made, next refused with {m.refused!r}")
    return [
        _measured(blocked(f"false report (griefing: {others} voters re-check a segment, {float(recheck):.1f} of work)",
                          "8.1 rule 7", burned),
                  f"the filer's balance change, {others} voters rejecting (bond burned)"),
        _measured(blocked("late serve (checkpoint served only on the voters' retry)", "8.1 rule 7",
                          -late.accused_stake_change),
                  "the accused's stake change, its report voided as served late (the filer's bond returned)"),
        # at most MAX_DEMANDS a round per account: the next one is refused
        _measured(blocked("leaf demand spam against an honest root (each answered)", "8.1 rule 5", -m.demand_change),
                  f"the demander's balance change per answered demand; {m.demands_made} a round, the next refused"),
    ]


def _measured(row: Row, how: str) -> Row:
    return replace(row, formula=f"-loss, measured on chain: {how}")
