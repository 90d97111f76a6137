"""`veritrain miner | validator | start`: run a node against any JSON-RPC chain."""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from protocol.cli.account import DeploymentOpt, KeysOpt, RpcOpt, node_client, parse_tokens
from protocol.cli.usage import USAGE_EXIT, BadUsage
from protocol.core.errors import VeritrainError
from protocol.node.json_logs import LOG_FORMAT_ENV, LogFormat

DataDirOpt = Annotated[Path, typer.Option(help="Node data dir (SQLite state + blob store)")]
ListenOpt = Annotated[str | None, typer.Option(help="libp2p listen multiaddr (default: a free 127.0.0.1 port)")]
AnnounceOpt = Annotated[str | None, typer.Option(metavar="MULTIADDR",
                                                 help="Address registered on chain for peers to dial, when it is "
                                                      "not --listen (listening on 0.0.0.0, or behind a port "
                                                      "forward); default: --listen")]
MoveOpt = Annotated[bool, typer.Option("--move", help="Take over this account's registration from another address "
                                                      "or node key (moving a node; the node there stops)")]
BootstrapOpt = Annotated[list[str] | None, typer.Option(help="Peer /ip4/../tcp/N/p2p/ID to keep connected (repeatable)")]
StakeOpt = Annotated[str | None, typer.Option(help="Target stake in tokens: top up to it before starting, less what "
                                                   "the account unbonded since this target was first given (a "
                                                   "restart never re-stakes what `veritrain unbond` queued)")]
RoundsOpt = Annotated[int | None, typer.Option(help="Stop after this many rounds")]
DiscoverOpt = Annotated[str | None, typer.Option(help="Also dial the peers this domain's DNS-AID records list, "
                                                      "once the on-chain registry confirms them")]
DiscoverServerOpt = Annotated[str | None, typer.Option(metavar="HOST:PORT",
                                                       help="Name server for --discover (default: the system resolver)")]
ClassOpt = Annotated[str | None, typer.Option("--hardware-class", metavar="ID_OR_LABEL",
                                              help="Hardware class to run (label or id, see `veritrain hardware`; "
                                                   "default: the run's profile)")]
MetricsPortOpt = Annotated[int | None, typer.Option(min=0, max=65535, help="Serve Prometheus metrics on this port "
                                                                          "(GET /metrics; default: none served)")]
MetricsHostOpt = Annotated[str, typer.Option(help="Address the metrics endpoint listens on")]
LogFormatOpt = Annotated[LogFormat, typer.Option(envvar=LOG_FORMAT_ENV,
                                                 help="Log lines on stderr: auto (JSON lines unless stderr is a "
                                                      "terminal), json or text")]


def _logging(fmt: LogFormat = LogFormat.AUTO) -> None:
    import os

    from protocol.node.json_logs import stream_handler
    from protocol.node.logs import quiet_noisy_loggers

    logging.basicConfig(level=logging.INFO, handlers=[stream_handler(sys.stderr, fmt)])
    os.environ[LOG_FORMAT_ENV] = fmt.value  # the node's workers write to the same stderr, in the same format
    quiet_noisy_loggers()


@dataclass(frozen=True)
class NodeFlags:
    """What `veritrain miner | validator` was given, as typed (checked by `_start_and_run`)."""

    rpc: str
    deployment: Path
    keys: Path
    data_dir: Path
    listen: str | None = None
    announce: str | None = None
    bootstrap: tuple[str, ...] = ()
    stake: str | None = None
    max_rounds: int | None = None
    move: bool = False
    cheat: str | None = None
    hardware_class: str | None = None
    discover: str | None = None
    discover_server: str | None = None
    capacity_margin: float = 0.5
    metrics_host: str = "127.0.0.1"
    metrics_port: int | None = None
    stage: int | None = None  # a staged run's miner: its stage
    stage_wait_s: float = 60.0
    slowdown: float = 1.0  # tests only: a miner this many times slower


def _run(role: str, flags: NodeFlags, log_format: LogFormat) -> None:
    from protocol.node.startup_steps import StartupSteps
    from protocol.node.stopping import Stopped, raise_on_stop_signals, reap_children

    raise_on_stop_signals()  # from here on a stop signal unwinds: `with` blocks close what they hold
    _logging(log_format)
    log = logging.getLogger(f"veritrain.{role}")
    steps = StartupSteps(log)
    try:
        code = _start_and_run(role, flags, log, steps)
    except Stopped as stop:
        log.info("stopping: %s", stop)
        code = stop.exit_code
    except VeritrainError as exc:
        if not _json_lines(log_format):
            raise  # the CLI's one `error:` line, for a person at a terminal
        log.error("error: %s", exc)  # off a terminal the error is a log record like every other line
        code = USAGE_EXIT if isinstance(exc, BadUsage) else 1
    finally:
        reap_children()  # multiprocessing's resource tracker, and any process left behind
    if code:
        raise typer.Exit(code)


def _json_lines(log_format: LogFormat) -> bool:
    from protocol.node.json_logs import JsonFormatter, formatter_for

    return isinstance(formatter_for(sys.stderr, log_format), JsonFormatter)


def _start_and_run(role: str, flags: NodeFlags, log: logging.Logger, steps: Any) -> int:
    """Check every input (flags, the deployment, the keystore, the RPC node, the data dir
    and the account's registration) before anything is sent, written or started; then start
    the worker, register and stake, and run the node until it is done (0) or a stop signal
    ends it (its exit code)."""
    from protocol.cli import node_setup as setup

    steps.step("checking the input", deployment=flags.deployment)
    target = None if flags.stake is None else parse_tokens(flags.stake)
    cheat = setup.miner_cheat(flags.cheat)
    server = setup.discover_server(flags.discover_server)
    from protocol.chain.backend import check_rpc_url

    check_rpc_url(flags.rpc)
    setup.check_multiaddr(flags.listen, "--listen")
    setup.check_multiaddr(flags.announce, "--announce")
    if flags.metrics_port is not None:
        from protocol.node.metrics_server import check_metrics_port

        check_metrics_port(flags.metrics_host, flags.metrics_port)  # a port in use
    setup.check_stage_flag(role, flags.deployment, flags.stage)
    # the file, the class asked for (a stage miner's on its stage)
    classes, chosen = setup.node_classes(flags.deployment, flags.hardware_class, flags.stage)
    client, node_keys = setup.open_client(flags.rpc, flags.deployment, flags.keys)  # password, then the RPC node
    from protocol.node.data_dir_lock import DataDirLock

    with DataDirLock(flags.data_dir):  # the only file written before the checks pass
        addr = setup.listen_addr(flags.listen, flags.data_dir)
        registered = flags.announce or addr
        setup.check_stake(role, client, flags.data_dir, target)
        check = _account_check(role, client, node_keys, registered, flags.move, steps)
        from protocol.node.worker_pool import ProfileWorker

        steps.step("starting the worker (imports torch)")
        with ProfileWorker(chosen).start() as worker:
            steps.step("checking local model, corpus and profile hashes")
            setup.check_local_hashes(client, worker)
            setup.register_and_stake(role, client, node_keys, flags.keys, registered, target, classes,
                                     flags.data_dir, steps, check)
            setup.remember_listen(flags.data_dir, addr)
            node = _node(role, client, node_keys, flags, addr, registered, cheat, chosen, server, log)
            node.prestarted_worker = worker  # the node runs its jobs in the worker the hashes came from
            node.startup = steps
            try:
                return _serve_node(node, client, addr, flags, log)
            finally:
                node.data.state.close()


def _account_check(role: str, client: Any, node_keys: Any, registered: str, move: bool, steps: Any) -> Any:
    """One live node per account (protocol/node/account_guard.py), asked before any transaction."""
    from protocol.chain.client import Role
    from protocol.node.account_guard import check_registration
    from protocol.p2p.key_probe import live_holder

    steps.step("checking the account's registration", account=client.address)
    return check_registration(client, Role[role.upper()], node_keys.identity, registered, move, live_holder)


def _node(role: str, client: Any, node_keys: Any, flags: NodeFlags, addr: str, registered: str, cheat: Any,
          chosen: Any, server: Any, log: logging.Logger) -> Any:
    from protocol.node.metrics import NodeMetrics
    from protocol.node.node_config import NodeConfig

    config = NodeConfig(data_dir=flags.data_dir, listen=addr, registered=registered, bootstrap=flags.bootstrap,
                        max_rounds=flags.max_rounds, discover=flags.discover, discover_server=server,
                        capacity_margin=flags.capacity_margin, hardware_class=chosen, stage=flags.stage,
                        stage_wait_s=flags.stage_wait_s, slowdown=flags.slowdown)
    if role == "miner" and flags.stage is not None:
        from miner.stage_node import StageMinerNode

        return StageMinerNode(client, node_keys, config, log, metrics=NodeMetrics())
    if role == "miner":
        from miner.node import MinerNode

        return MinerNode(client, node_keys, config, log, cheat=cheat, metrics=NodeMetrics())
    from validator.node import ValidatorNode

    return ValidatorNode(client, node_keys, config, log, metrics=NodeMetrics())


def _serve_node(node: Any, client: Any, addr: str, flags: NodeFlags, log: logging.Logger) -> int:
    import signal

    import trio

    from protocol.node.logs import kv
    from protocol.node.metrics_server import serving
    from protocol.node.stopping import Stopped, run_until_stopped

    with serving(node.metrics, flags.metrics_host, flags.metrics_port) as url:  # stopped when the node stops
        log.info("node up %s", kv(account=client.address, listen=addr, registered=node.config.registered,
                                   data_dir=flags.data_dir, metrics=url or "off"))
        signum = trio.run(run_until_stopped, node.run, log)
    if node.moved is not None:
        raise node.moved  # another node took the account over: one line, exit 1
    return 0 if signum is None else Stopped(signal.Signals(signum)).exit_code


def miner(rpc: RpcOpt, deployment: DeploymentOpt, keys: KeysOpt, data_dir: DataDirOpt, listen: ListenOpt = None,
          announce: AnnounceOpt = None, bootstrap: BootstrapOpt = None, stake: StakeOpt = None,
          max_rounds: RoundsOpt = None, move: MoveOpt = False,
          cheat: Annotated[str | None, typer.Option(hidden=True,  # tests only: kept out of an operator's help
                                                    help="Testing only: behave as this adversary")] = None,
          hardware_class: ClassOpt = None, discover: DiscoverOpt = None,
          discover_server: DiscoverServerOpt = None,
          capacity_margin: Annotated[float, typer.Option(
              min=0.05, max=1.0, help="Capacity-scaled work: train as many steps (up to the run's H) as fit in "
                                     "this share of the commit window left when training starts")] = 0.5,
          metrics_port: MetricsPortOpt = None, metrics_host: MetricsHostOpt = "127.0.0.1",
          stage: Annotated[int | None, typer.Option(min=0, help="A staged run: the stage this miner trains "
                                                           "(`veritrain hardware` says which fit here)")] = None,
          stage_wait: Annotated[float, typer.Option(min=1.0, help="A stage miner: seconds it waits for a "
                                                              "neighbour's tensor before ending the round at "
                                                              "the last whole segment")] = 60.0,
          slowdown: Annotated[float, typer.Option(min=1.0, hidden=True,  # tests only: kept out of an operator's help
                                                  help="Testing only: train this many times slower")] = 1.0,
          log_format: LogFormatOpt = LogFormat.AUTO) -> None:
    """Run a miner: train each round in a worker process, commit, publish, serve."""
    _run("miner", NodeFlags(rpc, deployment, keys, data_dir, listen, announce, tuple(bootstrap or ()), stake,
                            max_rounds, move, cheat, hardware_class, discover, discover_server, capacity_margin,
                            metrics_host, metrics_port, stage, stage_wait, slowdown), log_format)


def validator(rpc: RpcOpt, deployment: DeploymentOpt, keys: KeysOpt, data_dir: DataDirOpt, listen: ListenOpt = None,
              announce: AnnounceOpt = None, bootstrap: BootstrapOpt = None, stake: StakeOpt = None,
              max_rounds: RoundsOpt = None, move: MoveOpt = False,
              hardware_class: ClassOpt = None, discover: DiscoverOpt = None,
              discover_server: DiscoverServerOpt = None, metrics_port: MetricsPortOpt = None,
              metrics_host: MetricsHostOpt = "127.0.0.1", log_format: LogFormatOpt = LogFormat.AUTO) -> None:
    """Run a validator: replay challenged segments, score, report fraud, vote, finalize, attest."""
    _run("validator", NodeFlags(rpc, deployment, keys, data_dir, listen, announce, tuple(bootstrap or ()), stake,
                                max_rounds, move, hardware_class=hardware_class, discover=discover,
                                discover_server=discover_server, metrics_host=metrics_host,
                                metrics_port=metrics_port), log_format)


def start(rpc: RpcOpt, deployment: DeploymentOpt, keys: KeysOpt) -> None:
    """Open round 0 (anyone may, once miners and validators are staked)."""
    client, _ = node_client(rpc, deployment, keys)
    client.start()
    typer.echo("round 0 opened")


def install(app: typer.Typer, wrap: Any) -> None:
    for fn in (miner, validator, start):
        app.command()(wrap(fn))
