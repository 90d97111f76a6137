"""`veritrain explorer`: a local web page over the chain's settlement, the figures of `inspect`
refreshed as blocks arrive (protocol/explorer)."""

from __future__ import annotations

import ipaddress
import signal
import threading
from pathlib import Path
from typing import Annotated, Any

import typer

DEFAULT_PORT = 8550  # next to a dev node's 8545


def explorer(
    rpc: Annotated[str, typer.Option(help="JSON-RPC URL of the chain")] = "http://127.0.0.1:8545",
    deployment: Annotated[Path, typer.Option(help="Deployment file written by `veritrain deploy`")] = Path("deployment.json"),
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port to serve on (0: any free one)")] = DEFAULT_PORT,
    host: Annotated[str, typer.Option(help="Address to listen on (the page has no login: keep it local)")] = "127.0.0.1",
) -> None:
    """Serve a web page of rounds, held-out loss, stakes, rewards, disputes and result roots, read from the chain."""
    from protocol.chain.backend import connect
    from protocol.chain.client import ChainClient
    from protocol.chain.deployment import load_deployment
    from protocol.cli.app import console, err_console
    from protocol.explorer.api import ExplorerApi
    from protocol.explorer.server import Explorer

    dep = load_deployment(deployment)
    client = ChainClient(connect(rpc), dep)
    client.check_deployment()
    site = Explorer(ExplorerApi(client, rpc), host, port)
    url = site.start()
    if not _is_loopback(host):
        err_console.print(f"[yellow]warning:[/yellow] listening on {host}: anyone who reaches it can read the page",
                          highlight=False)
    console.print(f"explorer of chain {dep.chain_id} at {url} (Ctrl-C stops)", highlight=False, soft_wrap=True)
    # `kill` stops it as Ctrl-C does; and Ctrl-C stops it even where it was started ignoring SIGINT
    # (a shell script's background job, a test runner's worker)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.default_int_handler)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        site.stop()
        err_console.print("explorer stopped", highlight=False)


def _is_loopback(host: str) -> bool:
    try:
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name
        return False


def install(app: typer.Typer, wrap: Any) -> None:
    app.command()(wrap(explorer))
