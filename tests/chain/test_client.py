"""The chain client behaves the same on the embedded EVM and on anvil."""

from __future__ import annotations

import hashlib
import time

import pytest
from eth_account import Account

from protocol.chain.backend import advance_time, connect, dev_account
from protocol.chain.bls_registration import ensure_bls_key
from protocol.chain.claims import claim_owed
from protocol.chain.client import ChainClient, Phase, ReportStatus, Role, Vote
from protocol.chain.deploy import deploy
from protocol.chain.devchain import DevChain
from protocol.chain.settlement_history import SettlementHistory
from protocol.config.run_config import TOKEN_UNIT, RunConfig
from protocol.core.crypto.bls import bls_aggregate, bls_keygen, bls_sign, g2_to_eip2537
from protocol.core.crypto.signing import NodeIdentity, binding_message
from protocol.core.errors import ContractRevert, InsufficientFunds
from protocol.core.settlement.abi_words import list_hash
from protocol.core.settlement.fraud import FraudKind
from protocol.core.settlement.score_vector import (
    pack_segments,
    score_commitment,
    scores_hash,
    vector_root,
)


@pytest.fixture(params=["embedded", "anvil"])
def chain(request):
    if request.param == "embedded":
        handle = connect(None)
    else:
        handle = connect(request.getfixturevalue("anvil").url)
    deployer = dev_account(handle)
    return ChainClient(handle, deploy(handle, deployer, RunConfig()), deployer)


def funded_node(chain: ChainClient, role: Role, stake_tokens: int) -> ChainClient:
    account, identity = Account.create(), NodeIdentity.generate()
    chain.send_eth(account.address, 10**18)
    chain.transfer_tokens(account.address, stake_tokens * TOKEN_UNIT)
    node = chain.with_account(account)
    sig = identity.sign(binding_message(chain.handle.chain_id, bytes.fromhex(chain.staking.address[2:]),
                                        bytes.fromhex(account.address[2:])))
    node.register(role, identity.public_key, "/ip4/127.0.0.1/tcp/1", sig)
    node.stake(stake_tokens * TOKEN_UNIT)
    return node


def test_revert_is_one_error_type_on_every_backend(chain):
    """One round on the new settlement flow, reverts read the same on every backend: commit,
    calldata reveal checked against its commitment, BLS-certified result, window, final, claim."""
    miner = funded_node(chain, Role.MINER, 150)
    validator = funded_node(chain, Role.VALIDATOR, 250)
    secret = bls_keygen(b"\x03" * 32)
    assert ensure_bls_key(validator, secret) and not ensure_bls_key(validator, secret)
    chain.check_deployment()
    chain.start()
    assert chain.phase(0) == Phase.COMMIT
    update, root = hashlib.sha256(b"u").digest(), hashlib.sha256(b"r").digest()
    miner.commit_update(0, update, root)
    assert chain.phase(0) == Phase.SCORING  # the only active miner committed: closed early
    with pytest.raises(ContractRevert) as info:
        miner.commit_update(0, update, root)
    assert info.value.reason == "settlement: commit phase closed"
    with pytest.raises(ContractRevert, match="settlement: not a permitted validator"):
        miner.commit_scores(0, b"\x01" * 32)
    validator.store_seed(0)
    assert chain.round_info(0)["seed"] != b"\x00" * 32
    salt, witness_root, loss = b"\x07" * 32, b"\x08" * 32, 2_500_000
    root = vector_root(chain.handle.chain_id, chain.scores.address, validator.address, 0, [500], witness_root, loss)
    assert chain.scores.functions.vector_root_of(validator.address, 0, scores_hash([500]), witness_root,
                                                 loss).call() == root  # off-chain hashing matches the contract's
    validator.commit_scores(0, score_commitment(root, salt))
    with pytest.raises(ContractRevert, match="settlement: reveal does not match commitment"):
        validator.reveal_scores(0, pack_segments([501]), witness_root, loss, salt)
    with pytest.raises(ContractRevert, match="settlement: one score segment per 1,024 committed miners"):
        validator.reveal_scores(0, pack_segments([500, 1]) * 2, witness_root, loss, salt)
    validator.reveal_scores(0, pack_segments([500]), witness_root, loss, salt)
    assert chain.phase(0) == Phase.AUDIT
    validator.audits_done(0)
    assert chain.phase(0) == Phase.RESULT
    _certify(chain, validator, secret, 0, b"\x44" * 32)
    assert chain.phase(0) == Phase.ENDED and chain.current_round() == 1
    assert bytes(chain.call("rounds", "model_hash", 1)) == b"\x44" * 32
    settled = SettlementHistory(chain).final(0)
    assert settled is not None and settled.result.consensus == (500,)
    paid = claim_owed(miner)
    assert paid is not None and chain.token_balance(miner.address) == paid[0].owed > 0


def _certify(chain: ChainClient, validator: ChainClient, secret: int, r: int, model: bytes) -> None:
    """Post round `r`'s result (rebuilt from chain data) signed by `validator` alone, wait
    out the challenge window and make it final."""
    settled = SettlementHistory(chain).settle(r, model)
    words = list(settled.header.words())
    sig = g2_to_eip2537(bls_sign(secret, settled.header.result_root()))
    receipt = validator.post_result(words, sig, [], [])
    posted = int(chain.w3.eth.get_block(receipt["blockNumber"])["timestamp"])
    with pytest.raises(ContractRevert, match="results: challenge window open"):
        chain.finalize_result(words, list_hash([]), posted, 1)
    advance_time(chain.handle, chain.deployment.run_config.chain.result_challenge_window)
    chain.finalize_result(words, list_hash([]), posted, 1)


def test_unfunded_account_is_insufficient_funds(chain):
    broke = chain.with_account(Account.create())
    with pytest.raises(InsufficientFunds):
        broke.register(Role.MINER, b"\x01" * 32, "/ip4/127.0.0.1/tcp/1", b"\x00" * 64)


def test_event_log_reads_only_new_blocks_and_matches_a_full_scan():
    from protocol.chain.events import EventLog, read_events, read_many

    handle = connect(None)
    deployer = dev_account(handle)
    chain = ChainClient(handle, deploy(handle, deployer, RunConfig()), deployer)
    log = EventLog(chain, "staking", "Registered")
    assert log.rows() == []
    first = funded_node(chain, Role.MINER, 150)
    rows = log.rows()
    assert [r["account"] for r in rows] == [first.address]
    second = funded_node(chain, Role.VALIDATOR, 250)
    assert [r["account"] for r in log.rows()] == [first.address, second.address]
    assert log.rows() == read_events(chain, "staking", "Registered")  # nothing read twice, nothing missed
    # one query for several events of several contracts splits back into each event's rows
    wanted = [("staking", "Registered"), ("token", "Transfer"), ("staking", "Staked")]
    many = read_many(chain, wanted)
    for contract, event in wanted:
        assert many[(contract, event)] == read_events(chain, contract, event)
    assert len(many[("staking", "Registered")]) == 2 and many[("token", "Transfer")]


def test_reveal_witness_roots_audits_and_a_lazy_report_on_the_devchain():
    """reveal_scores carries the scores, witness root and loss as calldata, reveals() reads them
    back, audits_done closes the audit phase, a lazy_validator report names the accused, and the
    result certified by both validators ends the round; on the devnet's embedded chain."""
    dev = DevChain(funded_accounts=3)  # auto-mining, one block per transaction: no waiting
    deployer = ChainClient(dev.handle, deploy(dev.handle, dev.deployer, RunConfig()), dev.deployer)
    m_acc, *v_accs = dev.node_accounts()
    miner = _staked(deployer, m_acc, Role.MINER, 150)
    vals = [_staked(deployer, a, Role.VALIDATOR, 250 + 50 * i) for i, a in enumerate(v_accs)]
    secrets = [bls_keygen(bytes([i + 1]) * 32) for i in range(len(vals))]
    for v, secret in zip(vals, secrets, strict=True):
        ensure_bls_key(v, secret)
    deployer.start()
    miner.commit_update(0, hashlib.sha256(b"u").digest(), hashlib.sha256(b"r").digest())
    vals[0].store_seed(0)
    salt = b"\x05" * 32
    roots = {v.address: bytes([i + 1]) * 32 for i, v in enumerate(vals)}
    for i, v in enumerate(vals):
        v.commit_scores(0, score_commitment(vector_root(dev.handle.chain_id, deployer.scores.address, v.address, 0,
                                                        [700], roots[v.address], 2_000_000 + i), salt))
    for i, v in enumerate(vals):
        v.reveal_scores(0, pack_segments([700]), roots[v.address], 2_000_000 + i, salt)
    assert deployer.phase(0) == Phase.AUDIT and deployer.round_info(0)["audit_deadline"] > 0
    assert deployer.reveals(0) == {
        v.address: {"scores": [700], "segments": [bytes.fromhex("000002bc")], "witness_root": roots[v.address],
                    "heldout_loss": 2_000_000 + i}
        for i, v in enumerate(vals)}
    accused = vals[1].address
    rid = vals[0].report_fraud(0, accused, FraudKind.LAZY_VALIDATOR, 0, b"\x0e" * 32, b"\x0f" * 64)
    rep = deployer.report(rid)
    assert (rep["kind"], rep["miner"], rep["segment"]) == (FraudKind.LAZY_VALIDATOR, accused, 0)
    with pytest.raises(ContractRevert, match="disputes: accused cannot vote"):
        vals[1].vote_fraud(rid, Vote.REJECT)
    vals[0].resolve_fraud(rid)  # everyone who may vote did; only the reporter confirmed: void
    assert deployer.report(rid)["status"] == ReportStatus.VOID
    vals[0].audits_done(0)
    assert deployer.phase(0) == Phase.AUDIT and deployer.call("scores", "audited", 0, vals[0].address)
    vals[1].audits_done(0)
    assert deployer.phase(0) == Phase.RESULT
    settled = SettlementHistory(deployer).settle(0, b"\x55" * 32)
    assert settled.result.consensus == (700,) and settled.result.heldout_loss == 2_000_000
    words = list(settled.header.words())
    aggregate = bls_aggregate([bls_sign(s, settled.header.result_root()) for s in secrets])
    receipt = vals[1].post_result(words, g2_to_eip2537(aggregate), [], [])
    posted = int(deployer.w3.eth.get_block(receipt["blockNumber"])["timestamp"])
    advance_time(dev.handle, deployer.deployment.run_config.chain.result_challenge_window)
    deployer.finalize_result(words, list_hash([]), posted, 1)
    assert deployer.phase(0) == Phase.ENDED and not deployer.fallback(0)
    assert SettlementHistory(deployer).final(0) is not None


def _staked(deployer: ChainClient, account, role: Role, tokens: int) -> ChainClient:
    """A registered, staked node on a chain whose genesis gave `account` gas."""
    deployer.transfer_tokens(account.address, (tokens + 20) * TOKEN_UNIT)
    node = deployer.with_account(account)
    identity = NodeIdentity.generate()
    sig = identity.sign(binding_message(deployer.handle.chain_id, bytes.fromhex(deployer.staking.address[2:]),
                                        bytes.fromhex(account.address[2:])))
    node.register(role, identity.public_key, "/ip4/127.0.0.1/tcp/1", sig)
    node.stake(tokens * TOKEN_UNIT)
    return node


def test_pending_block_time_follows_a_clock_moved_ahead(chain):
    """Nodes decide whether a deadline has passed by the time the next block gets: on a dev
    chain whose clock was moved ahead (tests, benchmarks) the idle latest block and this
    machine's clock both lag, and only the pending block tells (the faults test stalled on it)."""
    before = int(time.time())
    advance_time(chain.handle, 600)
    latest = chain.block_time("latest")
    assert latest >= before + 600
    assert chain.block_time("pending") >= latest
    assert chain.block_time("pending") >= int(time.time()) + 590
