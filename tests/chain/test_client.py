"""The chain client behaves the same on the embedded EVM and on anvil."""

from __future__ import annotations

import hashlib

import pytest
from eth_account import Account
from protocol.chain.commitments import score_commitment, sort_miners

from protocol.chain.backend import connect, dev_account
from protocol.chain.client import ChainClient, Phase, ReportStatus, Role, Vote
from protocol.chain.deploy import deploy
from protocol.chain.devchain import DevChain
from protocol.config.run_config import TOKEN_UNIT, RunConfig
from protocol.core.errors import ContractRevert, InsufficientFunds
from protocol.core.fraud import FraudKind
from protocol.core.signing import NodeIdentity, binding_message


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
    miner = funded_node(chain, Role.MINER, 150)
    validator = funded_node(chain, Role.VALIDATOR, 250)
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
    miners = sort_miners([miner.address])
    salt, witnesses, sigs = b"\x07" * 32, [b"\x08" * 32], [b"\x09" * 64]
    commitment = score_commitment(chain.handle.chain_id, chain.scores.address, validator.address, 0, miners, [500],
                                  witnesses, sigs, salt)
    onchain = chain.scores.functions.score_commitment_hash(validator.address, 0, miners, [500], witnesses,
                                                           sigs[0], salt).call()
    assert commitment == onchain  # off-chain hashing matches the contract's
    validator.commit_scores(0, commitment)
    with pytest.raises(ContractRevert, match="settlement: reveal does not match commitment"):
        validator.reveal_scores(0, miners, [501], witnesses, sigs, salt)
    validator.reveal_scores(0, miners, [500], witnesses, sigs, salt)
    assert chain.phase(0) == Phase.AUDIT
    with pytest.raises(ContractRevert, match="settlement: audit phase open"):
        chain.finalize(0)
    validator.audits_done(0)
    chain.finalize(0)
    assert chain.call("scores", "consensus", 0, miner.address) == 500


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


def test_reveal_witnesses_audits_and_a_lazy_report_on_the_devchain():
    """reveal_scores carries witnesses and sigs, reveals() reads them back, audits_done closes the
    audit phase, and a lazy_validator report names the accused; on the devnet's embedded chain."""
    dev = DevChain(funded_accounts=3)  # auto-mining, one block per transaction: no waiting
    deployer = ChainClient(dev.handle, deploy(dev.handle, dev.deployer, RunConfig()), dev.deployer)
    m_acc, *v_accs = dev.node_accounts()
    miner = _staked(deployer, m_acc, Role.MINER, 150)
    vals = [_staked(deployer, a, Role.VALIDATOR, 250 + 50 * i) for i, a in enumerate(v_accs)]
    deployer.start()
    miner.commit_update(0, hashlib.sha256(b"u").digest(), hashlib.sha256(b"r").digest())
    vals[0].store_seed(0)
    miners = [miner.address]
    salt = b"\x05" * 32
    proofs = {v.address: ([bytes([i + 1]) * 32], [bytes([i + 10]) * 64]) for i, v in enumerate(vals)}
    for v in vals:
        v.commit_scores(0, score_commitment(dev.handle.chain_id, deployer.scores.address, v.address, 0, miners,
                                            [700], *proofs[v.address], salt))
    for v in vals:
        v.reveal_scores(0, miners, [700], *proofs[v.address], salt)
    assert deployer.phase(0) == Phase.AUDIT and deployer.round_info(0)["audit_deadline"] > 0
    assert deployer.reveals(0) == {
        v.address: {"miners": miners, "scores": [700], "witnesses": proofs[v.address][0], "sigs": proofs[v.address][1]}
        for v in vals}
    accused = vals[1].address
    rid = vals[0].report_fraud(0, accused, FraudKind.LAZY_VALIDATOR, 0, b"\x0e" * 32, proofs[accused][1][0])
    rep = deployer.report(rid)
    assert (rep["kind"], rep["miner"], rep["segment"]) == (FraudKind.LAZY_VALIDATOR, accused, 0)
    with pytest.raises(ContractRevert, match="disputes: accused cannot vote"):
        vals[1].vote_fraud(rid, Vote.REJECT)
    vals[0].resolve_fraud(rid)  # everyone who may vote did; only the reporter confirmed: void
    assert deployer.report(rid)["status"] == ReportStatus.VOID
    vals[0].audits_done(0)
    assert deployer.phase(0) == Phase.AUDIT and deployer.call("scores", "audited", 0, vals[0].address)
    vals[1].audits_done(0)
    assert deployer.phase(0) == Phase.AWAITING_FINALIZE
    deployer.finalize(0)
    assert deployer.phase(0) == Phase.FINALIZED and not deployer.fallback(0)
    assert deployer.call("scores", "consensus", 0, miner.address) == 700


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
