"""`veritrain` command line: deploy, inspect, devnet (keys and accounts, nodes, hardware, data,
export attach below)."""

from __future__ import annotations

import functools
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from protocol.cli.usage import USAGE_EXIT, BadUsage, flags_show_no_type
from protocol.core.errors import ConfigError, InsufficientFunds, VeritrainError

flags_show_no_type()
app = typer.Typer(add_completion=False, no_args_is_help=True, help="veritrain: verifiable decentralized training.")
console = Console()
err_console = Console(stderr=True)
F = TypeVar("F", bound=Callable[..., Any])

INSPECT_VIEWS = ("summary", "rounds", "round", "node", "disputes")


def _print_version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        console.print(f"veritrain {version('veritrain')}", highlight=False)
        raise typer.Exit()


@app.callback()
def _root(version: Annotated[bool, typer.Option("--version", is_eager=True, callback=_print_version,
                                               help="Print the installed version and exit")] = False) -> None:
    """veritrain: verifiable decentralized training."""


def one_line_errors(fn: F) -> F:
    """Turn any VeritrainError into one red line on stderr and exit 1, or 2 for a bad argument
    (no traceback)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except VeritrainError as exc:
            err_console.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False, soft_wrap=True)
            raise typer.Exit(USAGE_EXIT if isinstance(exc, BadUsage) else 1) from None
        except KeyboardInterrupt:
            err_console.print("[yellow]interrupted[/yellow]")
            raise typer.Exit(130) from None

    return wrapper  # type: ignore[return-value]


def _progress(message: str) -> None:
    err_console.print(f"[dim]·[/dim] {message}", highlight=False)


def _fund(handle: Any, deployment: Any, deployer: Any, accounts: list[str], wei: int, tokens_each: int,
          out: Path) -> None:
    """`deploy --fund`: gas and tokens to each account, refused in one line (the deployment
    stays written) when the deployer holds fewer tokens than that."""
    from protocol.chain.client import ChainClient
    from protocol.chain.deploy import fund as do_fund
    from protocol.cli.account import check_tokens_to_fund

    try:
        check_tokens_to_fund(ChainClient(handle, deployment, deployer), "the deployer", len(accounts), tokens_each)
    except InsufficientFunds as exc:
        raise InsufficientFunds(f"{exc} (deployed, {out} written; fund with `veritrain fund`)") from None
    do_fund(handle, deployment, deployer, accounts, wei, tokens_each, progress=_progress)


def _deployer(handle: Any, key: Path | None, dev_account: bool) -> Any:
    from protocol.chain.backend import dev_account as dev
    from protocol.node.keys import load_keystore

    if dev_account == (key is not None):
        raise ConfigError("give exactly one of --key KEYFILE or --dev-account")
    if dev_account:
        return dev(handle)
    password = os.environ.get("VERITRAIN_PASSWORD")
    if password is None:
        if not sys.stdin.isatty():
            raise ConfigError("set VERITRAIN_PASSWORD to unlock the keystore (no terminal to prompt on)")
        password = typer.prompt("keystore password", hide_input=True)
    assert key is not None  # exactly one of the two, checked above
    return load_keystore(key, password)


@app.command()
@one_line_errors
def deploy(
    rpc: Annotated[str, typer.Option(help="JSON-RPC URL of the chain (e.g. anvil at http://127.0.0.1:8545)")],
    out: Annotated[Path, typer.Option(help="Where to write the deployment file")],
    key: Annotated[Path | None, typer.Option(help="Encrypted keystore of the deployer")] = None,
    dev_account: Annotated[bool, typer.Option("--dev-account", help="Use the chain's pre-funded dev account")] = False,
    config: Annotated[Path | None, typer.Option(help="Run config TOML (defaults if omitted)")] = None,
    fund: Annotated[list[str] | None, typer.Option(help="Node account to fund with gas and tokens (repeatable)")] = None,
    fund_eth: Annotated[float, typer.Option(help="ETH of gas money per funded account")] = 10.0,
    fund_tokens: Annotated[int, typer.Option(help="Whole tokens per funded account")] = 10_000,
    genesis: Annotated[Path | None, typer.Option(help="Start from this Hugging Face Llama checkpoint folder "
                                                      "(config.json, *.safetensors); every node needs a copy "
                                                      "at the same path")] = None,
) -> None:
    """Deploy the contracts with a run config and write the deployment file."""
    from protocol.chain.backend import connect
    from protocol.chain.deploy import deploy as do_deploy
    from protocol.chain.deployment import save_deployment
    from protocol.cli.account import parse_address
    from protocol.config.run_config import load_run_config
    from protocol.node.pinning import prepare

    fund_to = [parse_address(a) for a in fund or []]  # a bad address is refused before anything is deployed
    run_config = load_run_config(config)
    if genesis is not None:
        from protocol.config.run_state import with_hf_genesis

        _progress(f"genesis: the Hugging Face Llama checkpoint in {genesis.expanduser().resolve()}")
        run_config = with_hf_genesis(run_config, genesis)
        _progress("wrote its config into [training.model] and the folder into [training.genesis]")
    handle = connect(rpc)
    deployer = _deployer(handle, key, dev_account)
    from protocol.chain.deploy import check_fundable

    check_fundable(handle, fund_to)  # before deploying: the deployment's own contracts are not there yet
    if int(handle.w3.eth.get_balance(deployer.address)) == 0:
        raise InsufficientFunds(f"deployer {deployer.address} has no gas money on chain {handle.chain_id}")
    _progress("pinning model, dataset and replay-profile hashes (nodes must reproduce them)")
    run_config = prepare(run_config)
    deployment = do_deploy(handle, deployer, run_config, progress=_progress)
    save_deployment(deployment, out)
    if fund_to:
        _fund(handle, deployment, deployer, fund_to, int(fund_eth * 10**18), fund_tokens, out)
    console.print(f"deployed to chain {deployment.chain_id}: rounds {deployment.contracts.rounds}; wrote {out}")


@app.command()
@one_line_errors
def inspect(
    view: Annotated[str, typer.Argument(help="summary | rounds | round N | node ADDRESS | disputes")] = "summary",
    target: Annotated[str | None, typer.Argument(help="Round number or node address")] = None,
    rpc: Annotated[str, typer.Option(help="JSON-RPC URL of the chain")] = "http://127.0.0.1:8545",
    deployment: Annotated[Path, typer.Option(help="Deployment file written by `veritrain deploy`")] = Path("deployment.json"),
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON with stable keys instead of tables")] = False,
    exact: Annotated[bool, typer.Option("--exact", help="Token amounts with all 18 decimals (tables round to 4; "
                                                        "--json is always exact)")] = False,
) -> None:
    """Show on-chain settlement: stakes, rewards, slashes, consensus scores, models, disputes."""
    from protocol.chain.backend import connect
    from protocol.chain.client import ChainClient
    from protocol.chain.deployment import load_deployment

    dep = load_deployment(deployment)
    client = ChainClient(connect(rpc), dep)
    client.check_deployment()
    show(client, view, target, as_json, exact)


def show(client: Any, view: str, target: str | None, as_json: bool, exact: bool = False) -> None:
    """Render one inspect view (shared with devnet)."""
    from protocol.chain import settlement_view as sv
    from protocol.cli import inspect_render as render

    if view not in INSPECT_VIEWS:
        raise BadUsage(f"unknown view {view!r}; expected one of {', '.join(INSPECT_VIEWS)}")
    if view in ("round", "node") and target is None:
        raise BadUsage(f"`inspect {view}` needs a {'round number' if view == 'round' else 'node address'}")
    if view == "round":
        if not target.isdigit():  # type: ignore[union-attr]
            raise BadUsage(f"round must be a number, got {target!r}")
        data: Any = sv.round_detail(client, int(target))  # type: ignore[arg-type]
    elif view == "node":
        if target is None or not client.w3.is_address(target):
            raise BadUsage(f"not an address: {target!r}")
        data = sv.node(client, target)
    else:
        builders: dict[str, Callable[[Any], Any]] = {"summary": sv.summary, "rounds": sv.rounds, "disputes": sv.disputes}
        data = builders[view](client)
    if as_json:
        print(json.dumps({"view": view, "data": data}, indent=2, sort_keys=True, default=str))
        return
    renderers: dict[str, Callable[[Console, Any, int, bool], None]] = {"summary": render.render_summary, "rounds": render.render_rounds, "round": render.render_round,
                "node": render.render_node, "disputes": render.render_disputes}
    renderers[view](render.wide(console), data, client.block_time(), exact)  # chain times against the chain's clock


from protocol.cli import account as cli_account  # noqa: E402  (commands attach to `app`)
from protocol.cli import data as cli_data  # noqa: E402
from protocol.cli import devnet as cli_devnet  # noqa: E402
from protocol.cli import dns_aid as cli_dns_aid  # noqa: E402
from protocol.cli import explorer as cli_explorer  # noqa: E402
from protocol.cli import export as cli_export  # noqa: E402
from protocol.cli import hardware as cli_hardware  # noqa: E402
from protocol.cli import node as cli_node  # noqa: E402

cli_account.install(app, one_line_errors)
cli_node.install(app, one_line_errors)
cli_hardware.install(app, one_line_errors)
cli_dns_aid.install(app, one_line_errors)
cli_data.install(app, one_line_errors)
cli_devnet.install(app, one_line_errors)
cli_export.install(app, one_line_errors)
cli_explorer.install(app, one_line_errors)

if __name__ == "__main__":  # pragma: no cover  (`python -m protocol.cli.app`, as the tests run it)
    from protocol.cli.usage import main

    main()
