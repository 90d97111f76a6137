"""`veritrain keys | register | stake | unbond | withdraw | claim`: one account's chain actions."""

from __future__ import annotations

import os
import re
import sys
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Annotated, Any

import typer

from protocol.cli.human import tokens, when
from protocol.core.errors import ConfigError

keys_app = typer.Typer(add_completion=False, no_args_is_help=True, help="Create and show node keys.")
PASSWORD_ENV = "VERITRAIN_PASSWORD"

RpcOpt = Annotated[str, typer.Option(help="JSON-RPC URL of the chain")]
DeploymentOpt = Annotated[Path, typer.Option(help="Deployment file written by `veritrain deploy`")]
KeysOpt = Annotated[Path, typer.Option(help="Folder made by `veritrain keys new`")]


def password(confirm: bool = False) -> str:
    """From VERITRAIN_PASSWORD, else a hidden prompt; never from argv (it would leak into ps)."""
    value = os.environ.get(PASSWORD_ENV)
    if value is not None:
        return value
    if not sys.stdin.isatty():
        raise ConfigError(f"set {PASSWORD_ENV} (no terminal to prompt for the keystore password)")
    return str(typer.prompt("keystore password", hide_input=True, confirmation_prompt=confirm))


def parse_tokens(text: str) -> int:
    """Whole or fractional tokens ("150", "0.5") to base units, exactly (a bad amount is a usage
    error, exit 2)."""
    from protocol.cli.usage import BadUsage
    from protocol.config.run_config import TOKEN_UNIT

    try:
        value = Decimal(text) * TOKEN_UNIT
    except InvalidOperation:
        raise BadUsage(f"not a token amount: {text!r}") from None
    if value <= 0:
        raise BadUsage(f"token amount must be positive, got {text}")
    if value != value.to_integral_value():
        raise BadUsage(f"token amount {text} has more than 18 decimals")
    return int(value)


def node_client(rpc: str, deployment: Path, keys: Path) -> Any:
    """A checked client signing with the node's account, plus its keys."""
    from protocol.chain.backend import connect
    from protocol.chain.client import ChainClient
    from protocol.chain.deployment import load_deployment
    from protocol.node.keys import load_keys

    dep = load_deployment(deployment)
    node_keys = load_keys(keys, password())
    client = ChainClient(connect(rpc), dep, node_keys.account)
    client.check_deployment()
    return client, node_keys


def new(out: Annotated[Path, typer.Option(help="Folder for keystore.json, node_key and bls_keystore.json")],
        account_key: Annotated[Path | None, typer.Option(
            help="File holding the hex private key of an account you already have: its keystore is "
                 "written instead of a new account's (the file is only read)")] = None) -> None:
    """Create an encrypted account keystore, an ed25519 node key and an encrypted BLS key
    (validators sign round results with it), all 0600. In a folder made before BLS keys
    existed, only the missing BLS key is added."""
    from protocol.node.bls_keystore import BLS_KEYSTORE_FILE, bls_keystore_public_key, new_bls_key
    from protocol.node.keys import KEYSTORE_FILE, keystore_address, new_keys

    key = None if account_key is None else read_private_key(account_key)
    secret = password(confirm=True)
    if (out / KEYSTORE_FILE).exists() and not (out / BLS_KEYSTORE_FILE).exists():
        bls_key = new_bls_key(out, secret)
        typer.echo(f"account  {keystore_address(out)}\nbls key  {bls_key.hex()}\nadded to {out}")
        return
    address, node_key = new_keys(out, secret, account_key=key)
    bls_key = bls_keystore_public_key(out)
    typer.echo(f"account  {address}\nnode key {node_key.hex()}\nbls key  {bls_key.hex()}\nwritten to {out}")


def read_private_key(path: Path) -> bytes:
    """32 bytes from a file of 64 hex digits (0x optional): a typed error, naming the file but never
    its content, before anything is written."""
    try:
        text = path.read_text().strip().removeprefix("0x")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read the account key in {path}: {exc}") from None
    if not re.fullmatch(r"[0-9a-fA-F]{64}", text):
        raise ConfigError(f"{path} does not hold a private key (64 hex digits)")
    return bytes.fromhex(text)


def show(keys: KeysOpt) -> None:
    """Print the account address (no password needed)."""
    from protocol.node.keys import keystore_address

    typer.echo(keystore_address(keys))


def register(
    role: Annotated[str, typer.Argument(help="miner | validator")],
    rpc: RpcOpt, deployment: DeploymentOpt, keys: KeysOpt,
    multiaddr: Annotated[str, typer.Option(help="libp2p address peers dial, e.g. /ip4/127.0.0.1/tcp/4001")],
    move: Annotated[bool, typer.Option("--move", help="Replace a registration at another address or node key, "
                                                      "though a live node may serve it (it stops)")] = False,
) -> None:
    """Register the node's account and node key (with its binding signature) on chain; refused
    while another live node serves the account (docs/OPERATORS.md §3), unless --move."""
    from protocol.chain.client import Role
    from protocol.chain.registration import register_node
    from protocol.node.account_guard import check_registration
    from protocol.p2p.key_probe import live_holder

    if role not in ("miner", "validator"):
        raise ConfigError(f"role must be miner or validator, got {role!r}")
    client, node_keys = node_client(rpc, deployment, keys)
    want = Role[role.upper()]
    if check_registration(client, want, node_keys.identity, multiaddr, move, live_holder).found:
        typer.echo(f"{node_keys.account.address} is already registered as {role} at {multiaddr}")
        return
    register_node(client, want, node_keys.identity, multiaddr)
    typer.echo(f"registered {node_keys.account.address} as {role}")


def stake(amount: Annotated[str, typer.Argument(help="Tokens to stake")], rpc: RpcOpt, deployment: DeploymentOpt,
          keys: KeysOpt) -> None:
    """Stake tokens (approves the staking contract first if needed)."""
    units = parse_tokens(amount)
    client, _ = node_client(rpc, deployment, keys)
    client.stake(units)
    typer.echo(f"staked {tokens(units)}; total {tokens(client.read.staking.stake_of(client.address))}")


def unbond(amount: Annotated[str, typer.Argument(help="Tokens to unbond")], rpc: RpcOpt, deployment: DeploymentOpt,
           keys: KeysOpt) -> None:
    """Queue stake for withdrawal after the unbonding delay (it stays slashable meanwhile)."""
    units = parse_tokens(amount)
    client, _ = node_client(rpc, deployment, keys)
    client.request_unbond(units)
    release = client.read.staking.unbond_release_time(client.address)
    queued = client.read.staking.unbonding_of(client.address)
    typer.echo(f"unbonding {tokens(units)} (queued in all: {tokens(queued)}); "
               f"withdrawable from {when(release, client.block_time())}")


def withdraw(rpc: RpcOpt, deployment: DeploymentOpt, keys: KeysOpt) -> None:
    """Withdraw stake whose unbonding delay has passed."""
    from protocol.core.errors import ContractRevert

    client, _ = node_client(rpc, deployment, keys)
    amount = client.read.staking.unbonding_of(client.address)
    if amount == 0:
        raise ConfigError(f"nothing unbonding for {client.address} (`veritrain unbond AMOUNT` first)")
    try:
        client.withdraw()
    except ContractRevert as exc:
        if "still unbonding" not in exc.reason:
            raise
        release = client.read.staking.unbond_release_time(client.address)
        raise ContractRevert(f"{exc.reason}: {tokens(amount)} withdrawable from "
                             f"{when(release, client.block_time())}") from None
    typer.echo(f"withdrew {tokens(amount)}")


def claim(rpc: RpcOpt, deployment: DeploymentOpt, keys: KeysOpt) -> None:
    """Claim everything this account earned up to the latest final round, with a Merkle proof
    built from chain data and checked against the on-chain root before it is sent."""
    from protocol.chain.claims import claim_owed

    client, _ = node_client(rpc, deployment, keys)
    claimed = claim_owed(client)
    if claimed is None:
        raise ConfigError(f"nothing to claim for {client.address}")
    owed = claimed[0]
    typer.echo(f"claimed {tokens(owed.owed)} (everything earned up to round {owed.round})")


ADDRESS = re.compile(r"0x[0-9a-fA-F]{40}")
DEV_CHAIN_IDS = (31337, 1337)  # anvil and hardhat, ganache and geth --dev: the chains with a known dev key


def parse_address(text: str) -> str:
    """A 0x address in any case, checksummed (EIP-55); a usage error (exit 2) when it is not
    one. Mixed case must be its checksum: mixed case that is not is a typo, not an address."""
    from protocol.cli.usage import BadUsage
    from protocol.core.crypto.keccak import checksum_address

    if not ADDRESS.fullmatch(text):
        raise BadUsage(f"not an address: {text!r}")
    checksummed = checksum_address(text)
    digits = text[2:]
    if digits not in (digits.lower(), digits.upper()) and text != checksummed:
        raise BadUsage(f"address {text} fails its EIP-55 checksum (a typo?); give it as it was written, "
                       "or in lowercase")
    return checksummed


def check_tokens_to_fund(client: Any, payer: str, accounts: int, tokens_each: int) -> None:
    """Raise InsufficientFunds unless the client's account holds `tokens_each` whole tokens for
    each of `accounts` accounts (before any is funded: the token would refuse a transfer)."""
    from protocol.config.run_config import TOKEN_UNIT
    from protocol.core.errors import InsufficientFunds

    held, needed = client.token_balance(client.address), tokens_each * TOKEN_UNIT * accounts
    if needed > held:
        raise InsufficientFunds(f"{payer} {client.address} holds {tokens(held)} tokens; {tokens(needed)} needed "
                                f"to fund {accounts} account(s) with {tokens_each} each")


def fund(
    addresses: Annotated[list[str], typer.Argument(help="Accounts to fund (node accounts added after deploy)")],
    rpc: RpcOpt, deployment: DeploymentOpt,
    dev_account: Annotated[bool, typer.Option("--dev-account", help="Pay from the chain's pre-funded dev account "
                                                                    "(the deployer on a dev chain)")] = False,
    eth: Annotated[str, typer.Option(help="ETH of gas money per account")] = "10",
    tokens_each: Annotated[int, typer.Option("--tokens", min=0, help="Whole tokens per account")] = 10_000,
) -> None:
    """Send gas money and tokens from the dev account to accounts added after deploy, on a dev
    chain (anvil), as `deploy --fund` does."""
    from protocol.chain.backend import connect
    from protocol.chain.backend import dev_account as dev
    from protocol.chain.client import ChainClient
    from protocol.chain.deploy import check_fundable
    from protocol.chain.deploy import fund as do_fund
    from protocol.chain.deployment import load_deployment
    from protocol.cli.usage import BadUsage

    if not dev_account:
        raise BadUsage("give --dev-account: `veritrain fund` pays from a dev chain's pre-funded account "
                       "(on another chain the operator sends gas and tokens)")
    wei = parse_eth(eth)
    accounts = [parse_address(a) for a in addresses]
    dep = load_deployment(deployment)
    handle = connect(rpc)
    if not handle.embedded and handle.chain_id not in DEV_CHAIN_IDS:
        raise ConfigError(f"chain {handle.chain_id} is not a dev chain (ids {', '.join(map(str, DEV_CHAIN_IDS))}): "
                          "--dev-account's key is public, so it funds nothing there")
    payer = dev(handle)
    client = ChainClient(handle, dep, payer)
    client.check_deployment()
    check_tokens_to_fund(client, "the dev account", len(accounts), tokens_each)
    check_fundable(handle, accounts)
    do_fund(handle, dep, payer, accounts, wei, tokens_each)
    for address in accounts:
        typer.echo(f"funded {address}: {tokens(wei)} ETH, {tokens_each} tokens")


def parse_eth(text: str) -> int:
    """ETH ("10", "0.5", "0") to wei, exactly."""
    from protocol.cli.usage import BadUsage

    try:
        value = Decimal(text) * 10**18
    except InvalidOperation:
        raise BadUsage(f"not an ETH amount: {text!r}") from None
    if value < 0 or value != value.to_integral_value():
        raise BadUsage(f"not an ETH amount: {text!r} (at least 0, at most 18 decimals)")
    return int(value)


def install(app: typer.Typer, wrap: Any) -> None:
    """Attach these commands to the main app, each wrapped for one-line errors."""
    keys_app.command("new")(wrap(new))
    keys_app.command("show")(wrap(show))
    app.add_typer(keys_app, name="keys")
    for fn in (register, stake, unbond, withdraw, claim, fund):
        app.command()(wrap(fn))
