"""Deploy and wire the eleven contracts; fund node accounts on dev chains."""

from __future__ import annotations

from collections.abc import Callable

from eth_account.signers.local import LocalAccount

from contracts.build import load_all, manifest, stale
from protocol.chain.backend import ChainHandle
from protocol.chain.deployment import ContractAddresses, Deployment, run_blob_caps
from protocol.chain.tx import TxSender
from protocol.config.run_config import TOKEN_UNIT, RunConfig
from protocol.core.errors import ChainError, ConfigError, InsufficientFunds

Progress = Callable[[str], None]


def deploy(handle: ChainHandle, deployer: LocalAccount, config: RunConfig,
           progress: Progress = lambda _msg: None) -> Deployment:
    """Deploy Token, Staking, BlsKeys, Rounds, Scores, Rewards, Results, ColumnChallenges, TreeChallenges,
    AccountChallenges, ClaimsChallenges and Disputes, wire them and renounce ownership. The deployment records the run's
    per-kind blob caps."""
    w3, sender = handle.w3, TxSender(handle.w3)
    if int(w3.eth.get_balance(deployer.address)) == 0:
        raise InsufficientFunds(f"deployer {deployer.address} has no gas money on chain {handle.chain_id}")
    caps = run_blob_caps(config)  # before any transaction: a run config it refuses costs no gas
    if stale():  # a contract edited since the shipped artifacts were built would deploy old code
        raise ConfigError("contracts/*.vy changed since contracts/artifacts was built; run python -m contracts.build")
    artifacts = load_all()  # shipped with the package: no compiler at deploy
    start_block = int(w3.eth.block_number)
    holders, amounts = _genesis(config, deployer.address)
    chain = config.chain

    def new(name: str, *args: object) -> str:
        progress(f"deploying {name}")
        art = artifacts[name]
        factory = w3.eth.contract(abi=art.abi, bytecode=art.bytecode)
        receipt = sender.send(factory.constructor(*args), deployer)
        if not receipt.get("contractAddress"):
            raise ChainError(f"{name} deployment returned no contract address")
        return str(receipt["contractAddress"])

    token = new("Token", holders, amounts)
    staking = new("Staking", token, chain.min_miner_stake * TOKEN_UNIT, chain.min_validator_stake * TOKEN_UNIT,
                  chain.max_validator_permits, chain.unbonding_delay, chain.class_stake * TOKEN_UNIT)
    keys = new("BlsKeys", staking)
    rounds = new("Rounds", staking, config.config_hash(), config.genesis_hash(),
                 chain.commit_duration, chain.score_duration, chain.reveal_duration, chain.audit_duration)
    scores = new("Scores", rounds)
    rewards = new("Rewards", token, chain.emission_per_round * TOKEN_UNIT, chain.miner_share_bps)
    results = new("Results", rounds, rewards, staking, chain.result_duration, chain.result_challenge_window,
                  chain.signer_slash_bps, chain.reporter_share_bps)
    bond = chain.challenge_bond * TOKEN_UNIT
    column_challenges = new("ColumnChallenges", token, rounds, scores, rewards, results, bond, chain.committee)
    tree_challenges = new("TreeChallenges", token, rounds, scores, rewards, results, bond)
    account_challenges = new("AccountChallenges", token, rounds, scores, rewards, results, bond)
    claims_challenges = new("ClaimsChallenges", token, rounds, scores, rewards, results, bond)
    disputes = new("Disputes", token, staking, rounds, rewards, chain.report_bond * TOKEN_UNIT,
                   chain.challenge_window, chain.slash_bps, chain.reporter_share_bps, chain.absence_rounds,
                   chain.max_reports_per_round, chain.late_serve_fee * TOKEN_UNIT, chain.result_duration)
    progress("wiring contracts and renouncing ownership")
    contract = lambda name, addr: w3.eth.contract(address=addr, abi=artifacts[name].abi)  # noqa: E731
    sender.send(contract("Staking", staking).functions.wire(disputes, results, keys), deployer)
    sender.send(contract("BlsKeys", keys).functions.wire(rounds), deployer)
    sender.send(contract("Rounds", rounds).functions.wire(scores, rewards, results, keys), deployer)
    sender.send(contract("Rewards", rewards).functions.wire(disputes, results), deployer)
    sender.send(contract("Results", results).functions.wire(column_challenges, tree_challenges, account_challenges,
                                                                 claims_challenges), deployer)
    token_c = contract("Token", token)
    sender.send(token_c.functions.set_minter(rewards, True), deployer)
    sender.send(token_c.functions.renounce_ownership(), deployer)
    return Deployment(
        chain_id=handle.chain_id, deploy_block=start_block, deployer=deployer.address,
        contracts=ContractAddresses(token=token, staking=staking, keys=keys, rounds=rounds, scores=scores,
                                    rewards=rewards, results=results, column_challenges=column_challenges,
                                    tree_challenges=tree_challenges, account_challenges=account_challenges,
                                    claims_challenges=claims_challenges, disputes=disputes),
        run_config=config, run_config_hash=config.config_hash().hex(), sources_hash=manifest()["sources_hash"],
        blob_caps=caps,  # where foreign peers read them (docs/INTEROP.md)
    )


def _genesis(config: RunConfig, deployer: str) -> tuple[list[str], list[int]]:
    if not config.genesis:
        return [deployer], [config.genesis_supply * TOKEN_UNIT]
    return [a.address for a in config.genesis], [a.amount * TOKEN_UNIT for a in config.genesis]


ZERO_ADDRESS = "0x" + "00" * 20


def check_fundable(handle: ChainHandle, addresses: list[str]) -> None:
    """Refuses, before anything is sent, an address funding cannot reach: the zero address
    (the token refuses transfers to it) or a contract (it refuses plain ETH, and a node's
    account is a key, never a contract)."""
    from web3 import Web3

    for address in addresses:
        if int(address, 16) == 0:
            raise ConfigError(f"cannot fund {address}: the token refuses transfers to the zero address "
                              "(a node's address is printed by `veritrain keys show --keys DIR`)")
        if handle.w3.eth.get_code(Web3.to_checksum_address(address)):
            raise ConfigError(f"cannot fund {address}: it is a contract, which refuses plain ETH (a node's account "
                              "is a key: `veritrain keys show --keys DIR` prints it); nothing was sent")


def fund(handle: ChainHandle, deployment: Deployment, deployer: LocalAccount, addresses: list[str],
         eth_wei: int, tokens: int, progress: Progress = lambda _msg: None) -> None:
    """Send gas money and tokens from the deployer to each address (dev chains only)."""
    from protocol.chain.client import ChainClient

    client = ChainClient(handle, deployment, deployer)
    for address in addresses:
        progress(f"funding {address}")
        if eth_wei:
            client.send_eth(address, eth_wei)
        if tokens:
            client.transfer_tokens(address, tokens * TOKEN_UNIT)
