"""`veritrain keys | register | stake | unbond | withdraw | claim`: one account's chain actions."""

from __future__ import annotations

import os
import sys
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Annotated, Any

import typer

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
    """Whole or fractional tokens ("150", "0.5") to base units."""
    from protocol.config.run_config import TOKEN_UNIT

    try:
        value = Decimal(text)
    except InvalidOperation as exc:
        raise ConfigError(f"not a token amount: {text!r}") from exc
    if value <= 0:
        raise ConfigError("token amount must be positive")
    return int(value * TOKEN_UNIT)


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


def new(out: Annotated[Path, typer.Option(help="Folder for keystore.json, node_key and bls_keystore.json")]) -> None:
    """Create an encrypted account keystore, an ed25519 node key and an encrypted BLS key
    (validators sign round results with it), all 0600. In a folder made before BLS keys
    existed, only the missing BLS key is added."""
    from protocol.node.bls_keystore import BLS_KEYSTORE_FILE, bls_keystore_public_key, new_bls_key
    from protocol.node.keys import KEYSTORE_FILE, keystore_address, new_keys

    secret = password(confirm=True)
    if (out / KEYSTORE_FILE).exists() and not (out / BLS_KEYSTORE_FILE).exists():
        bls_key = new_bls_key(out, secret)
        typer.echo(f"account  {keystore_address(out)}\nbls key  {bls_key.hex()}\nadded to {out}")
        return
    address, node_key = new_keys(out, secret)
    bls_key = bls_keystore_public_key(out)
    typer.echo(f"account  {address}\nnode key {node_key.hex()}\nbls key  {bls_key.hex()}\nwritten to {out}")


def show(keys: KeysOpt) -> None:
    """Print the account address (no password needed)."""
    from protocol.node.keys import keystore_address

    typer.echo(keystore_address(keys))


def register(
    role: Annotated[str, typer.Argument(help="miner | validator")],
    rpc: RpcOpt, deployment: DeploymentOpt, keys: KeysOpt,
    multiaddr: Annotated[str, typer.Option(help="libp2p address peers dial, e.g. /ip4/127.0.0.1/tcp/4001")],
) -> None:
    """Register the node's account and node key (with its binding signature) on chain."""
    from protocol.chain.client import Role
    from protocol.core.signing import binding_message

    if role not in ("miner", "validator"):
        raise ConfigError(f"role must be miner or validator, got {role!r}")
    client, node_keys = node_client(rpc, deployment, keys)
    message = binding_message(client.handle.chain_id, bytes.fromhex(client.staking.address[2:]),
                              bytes.fromhex(node_keys.account.address[2:]))
    client.register(Role[role.upper()], node_keys.identity.public_key, multiaddr, node_keys.identity.sign(message))
    typer.echo(f"registered {node_keys.account.address} as {role}")


def stake(amount: Annotated[str, typer.Argument(help="Tokens to stake")], rpc: RpcOpt, deployment: DeploymentOpt,
          keys: KeysOpt) -> None:
    """Stake tokens (approves the staking contract first if needed)."""
    client, _ = node_client(rpc, deployment, keys)
    client.stake(parse_tokens(amount))
    typer.echo(f"staked {amount}; total {client.call('staking', 'staked', client.address) / 10**18:g}")


def unbond(amount: Annotated[str, typer.Argument(help="Tokens to unbond")], rpc: RpcOpt, deployment: DeploymentOpt,
           keys: KeysOpt) -> None:
    """Queue stake for withdrawal after the unbonding delay (it stays slashable meanwhile)."""
    client, _ = node_client(rpc, deployment, keys)
    client.request_unbond(parse_tokens(amount))
    release = client.call("staking", "unbond_release_time", client.address)
    typer.echo(f"unbonding {amount}; withdrawable from chain time {release}")


def withdraw(rpc: RpcOpt, deployment: DeploymentOpt, keys: KeysOpt) -> None:
    """Withdraw stake whose unbonding delay has passed."""
    client, _ = node_client(rpc, deployment, keys)
    amount = client.call("staking", "unbonding", client.address)
    client.withdraw()
    typer.echo(f"withdrew {amount / 10**18:g}")


def claim(rpc: RpcOpt, deployment: DeploymentOpt, keys: KeysOpt) -> None:
    """Claim everything this account earned up to the latest final round, with a Merkle proof
    built from chain data and checked against the on-chain root before it is sent."""
    from protocol.chain.claims import claim_owed

    client, _ = node_client(rpc, deployment, keys)
    claimed = claim_owed(client)
    if claimed is None:
        raise ConfigError(f"nothing to claim for {client.address}")
    owed = claimed[0]
    typer.echo(f"claimed {format_tokens(owed.owed)} (everything earned up to round {owed.round})")


def format_tokens(wei: int) -> str:
    """An exact token amount: whole tokens, then the significant decimals of 18."""
    whole, frac = divmod(wei, 10**18)
    return f"{whole}" if frac == 0 else f"{whole}.{frac:018d}".rstrip("0")


def install(app: typer.Typer, wrap: Any) -> None:
    """Attach these commands to the main app, each wrapped for one-line errors."""
    keys_app.command("new")(wrap(new))
    keys_app.command("show")(wrap(show))
    app.add_typer(keys_app, name="keys")
    for fn in (register, stake, unbond, withdraw, claim):
        app.command()(wrap(fn))
