"""`veritrain dns-aid records`: print the DNS-AID zone fragment of a deployment's nodes."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated, Any

import typer

from protocol.cli.account import DeploymentOpt

dns_aid = typer.Typer(help="Discovery by DNS-AID (SVCB + libp2p dnsaddr records)", no_args_is_help=True)


def records(
    domain: Annotated[str, typer.Option(help="The domain whose zone will hold the records, e.g. example.org")],
    deployment: DeploymentOpt = Path("deployment.json"),
    rpc: Annotated[str, typer.Option(help="JSON-RPC URL of the chain")] = "http://127.0.0.1:8545",
) -> None:
    """Print SVCB, dnsaddr TXT and index records for every eligible registered node."""
    from protocol.chain.backend import connect
    from protocol.chain.client import ChainClient
    from protocol.chain.deployment import load_deployment
    from protocol.node.dns_hints import records as zone_records

    client = ChainClient(connect(rpc), load_deployment(deployment))
    client.check_deployment()
    typer.echo(zone_records(client, domain, logging.getLogger("veritrain.dns-aid")), nl=False)


def install(app: typer.Typer, wrap: Any) -> None:
    dns_aid.command()(wrap(records))
    app.add_typer(dns_aid, name="dns-aid")
