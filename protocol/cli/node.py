"""`veritrain miner | validator | start`: run a node against any JSON-RPC chain."""

from __future__ import annotations

import logging
import socket
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from protocol.cli.account import DeploymentOpt, KeysOpt, RpcOpt, node_client, parse_tokens
from protocol.config.atomic import atomic_write
from protocol.core.errors import ConfigError, InsufficientFunds
from protocol.node.json_logs import LogFormat

DataDirOpt = Annotated[Path, typer.Option(help="Node data dir (SQLite state + blob store)")]
ListenOpt = Annotated[str | None, typer.Option(help="libp2p listen multiaddr (default: a free 127.0.0.1 port)")]
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
LogFormatOpt = Annotated[LogFormat, typer.Option(envvar="VERITRAIN_LOG_FORMAT",
                                                 help="Log lines on stderr: auto (JSON lines unless stderr is a "
                                                      "terminal), json or text")]


def _listen(listen: str | None, data_dir: Path) -> str:
    """The given address, else the one this data dir used before (a restarted node keeps
    the address peers know from the registry), else a free loopback port."""
    if listen:
        return listen
    saved = data_dir / "listen_addr"
    if saved.is_file():
        addr = saved.read_text().strip()
        if _port_free(int(addr.rsplit("/", 1)[1])):
            return addr
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"/ip4/127.0.0.1/tcp/{sock.getsockname()[1]}"


def _remember_listen(data_dir: Path, addr: str) -> None:
    # only once the node is set up: bad input must leave no state behind
    data_dir.mkdir(parents=True, exist_ok=True)
    atomic_write(data_dir / "listen_addr", addr.encode())


def _port_free(port: int) -> bool:
    with socket.socket() as sock:
        # as the libp2p listener does: connections of a killed predecessor in TIME_WAIT
        # must not stop a restarted node from reusing its port
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _logging(fmt: LogFormat = LogFormat.AUTO) -> None:
    from protocol.node.json_logs import stream_handler
    from protocol.node.logs import quiet_noisy_loggers

    logging.basicConfig(level=logging.INFO, handlers=[stream_handler(sys.stderr, fmt)])

    quiet_noisy_loggers()


def open_client(rpc: str, deployment: Path, keys: Path) -> tuple[Any, Any]:
    """The checked client and keys, cheapest check first: the deployment file, the keystore
    password, then the RPC node and its contracts. Nothing slow (torch, the worker) runs before."""
    from protocol.chain.deployment import load_deployment
    from protocol.cli.account import password
    from protocol.node.keys import load_keys

    dep = load_deployment(deployment)
    node_keys = load_keys(keys, password())
    from protocol.chain.backend import connect
    from protocol.chain.client import ChainClient

    client = ChainClient(connect(rpc), dep, node_keys.account)
    client.check_deployment()
    if int(client.w3.eth.get_balance(node_keys.account.address)) == 0:
        raise InsufficientFunds(f"account {client.address} has no gas money; fund it (veritrain deploy --fund)")
    return client, node_keys


def check_local_hashes(client: Any, worker: Any) -> None:
    """Refuse to run unless this machine reproduces the run's model, corpus and profile hashes,
    computed in `worker` (of the class the node runs)."""
    from protocol.config.run_setup import check_genesis_present, check_local, resolve
    from protocol.config.run_state import pinned_hashes

    config = client.deployment.run_config
    check_genesis_present(resolve(config).spec)  # a missing checkpoint folder: said before the worker starts
    check_local(config, worker.ready().call(pinned_hashes, resolve(config).spec))


def register_and_stake(role: str, client: Any, node_keys: Any, keys: Path, listen: str, stake: str | None,
                       classes: int | None, data_dir: Path, steps: Any) -> None:
    """Register (role, node key, address, the hardware class set `classes` when given, a
    validator's BLS key) where the chain does not hold it already, then top the stake up to
    its target (protocol/core/settlement/stake_target.py)."""
    from protocol.chain.client import Role
    from protocol.chain.registration import holds_registration, register_node

    want = Role[role.upper()]
    if holds_registration(client, want, node_keys.identity, listen):
        steps.step("registration found", role=role, listen=listen)
    else:
        steps.step("registering", role=role, listen=listen)
        register_node(client, want, node_keys.identity, listen)
    if classes is not None:
        _register_classes(client, classes)
    if want == Role.VALIDATOR:
        from protocol.chain.bls_registration import ensure_bls_key

        if node_keys.bls is None:
            raise ConfigError(f"{keys} holds no BLS key; a validator signs results with one (veritrain keys new)")
        ensure_bls_key(client, node_keys.bls)
    if stake is not None:
        _top_up(client, parse_tokens(stake), data_dir, steps)


def _top_up(client: Any, target: int, data_dir: Path, steps: Any) -> None:
    from protocol.cli.human import tokens
    from protocol.node.stake_target import stake_to_add
    from protocol.node.store import NodeState

    state = NodeState(data_dir / "state.sqlite")  # the same file the node's DataDir opens
    try:
        missing, unbonded = stake_to_add(client, state, target)
    finally:
        state.close()
    if missing > 0:
        steps.step("staking", amount=tokens(missing), target=tokens(target))
        client.stake(missing)
    else:
        steps.step("stake in place", staked=tokens(client.read.staking.stake_of(client.address)),
                   target=tokens(target), unbonded_since=tokens(unbonded))


def _register_classes(client: Any, classes: int) -> None:
    """Register the class set, which the chain fixes at the first stake: a staked account
    running another class is refused here, before the node checks anything wrongly."""
    from protocol.config.run_setup import resolve
    from protocol.core.hardware.hardware_class import classes_in, label
    from protocol.core.settlement.class_checks import effective_classes

    registered = client.read.staking.hardware_classes(client.address)
    if effective_classes(registered) == classes:
        return
    if client.read.staking.classes_fixed(client.address):
        permitted = resolve(client.deployment.run_config).classes
        held = ", ".join(label(c) for c in classes_in(permitted, effective_classes(registered)))
        raise ConfigError(f"account {client.address} is registered for hardware class {held}, fixed since it "
                          f"first staked; run that class (--hardware-class) or use another account")
    client.set_hardware_classes(classes)


def node_classes(deployment: Path, wanted: str | None) -> tuple[int, Any]:
    """The class set this node registers and the class it runs (`wanted`, else the run's
    default). Refuses a class the run does not permit or this machine cannot run."""
    from protocol.chain.deployment import load_deployment
    from protocol.config.run_setup import training_spec
    from protocol.core.hardware.hardware_class import class_mask
    from protocol.node.hardware_choice import choose_class

    spec = training_spec(load_deployment(deployment).run_config)
    chosen = choose_class(spec, wanted)
    return class_mask(spec.classes, [chosen]), chosen


def _run(role: str, rpc: str, deployment: Path, keys: Path, data_dir: Path, listen: str | None,
         bootstrap: list[str] | None, stake: str | None, max_rounds: int | None, cheat: str | None = None,
         hardware_class: str | None = None, discover: str | None = None,
         discover_server: str | None = None, capacity_margin: float = 0.5, metrics_host: str = "127.0.0.1",
         metrics_port: int | None = None, log_format: LogFormat = LogFormat.AUTO) -> None:
    from protocol.node.startup_steps import StartupSteps
    from protocol.node.stopping import Stopped, raise_on_stop_signals, reap_children

    raise_on_stop_signals()  # from here on a stop signal unwinds: `with` blocks close what they hold
    _logging(log_format)
    log = logging.getLogger(f"veritrain.{role}")
    steps = StartupSteps(log, live=sys.stderr.isatty() and log_format != LogFormat.JSON)
    try:
        code = _start_and_run(role, rpc, deployment, keys, data_dir, listen, bootstrap, stake, max_rounds, cheat,
                              hardware_class, discover, discover_server, capacity_margin, metrics_host,
                              metrics_port, log, steps)
    except Stopped as stop:
        steps.done()
        log.info("stopping: %s", stop)
        code = stop.exit_code
    finally:
        steps.done()
        reap_children()  # multiprocessing's resource tracker, and any process left behind
    if code:
        raise typer.Exit(code)


def _start_and_run(role: str, rpc: str, deployment: Path, keys: Path, data_dir: Path, listen: str | None,
                   bootstrap: list[str] | None, stake: str | None, max_rounds: int | None, cheat: str | None,
                   hardware_class: str | None, discover: str | None, discover_server: str | None,
                   capacity_margin: float, metrics_host: str, metrics_port: int | None, log: logging.Logger,
                   steps: Any) -> int:
    """Check the input, start the worker, register and stake, then run the node until it is
    done (0) or a stop signal ends it (its exit code)."""
    steps.step("checking the run config", deployment=deployment)
    miner_cheat = _cheat(cheat)  # a bad name fails before anything is sent
    server = _discover_server(discover_server)  # so does a bad name server
    if metrics_port is not None:
        from protocol.node.metrics_server import check_metrics_port

        check_metrics_port(metrics_host, metrics_port)  # and so does a metrics port in use
    classes, chosen = node_classes(deployment, hardware_class)  # the deployment file, then the class asked for
    client, node_keys = open_client(rpc, deployment, keys)  # password, RPC: before anything slow
    addr = _listen(listen, data_dir)
    from protocol.node.worker_pool import ProfileWorker

    steps.step("starting the worker (imports torch)")
    with ProfileWorker(chosen).start() as worker:
        steps.step("checking local model, corpus and profile hashes")
        check_local_hashes(client, worker)
        register_and_stake(role, client, node_keys, keys, addr, stake, classes, data_dir, steps)
        _remember_listen(data_dir, addr)
        node = _node(role, client, node_keys, data_dir, addr, bootstrap, max_rounds, miner_cheat, chosen,
                     discover, server, capacity_margin, log)
        node.prestarted_worker = worker  # the node runs its jobs in the worker the hashes came from
        node.startup = steps
        try:
            return _serve_node(node, client, addr, data_dir, metrics_host, metrics_port, log)
        finally:
            node.data.state.close()


def _node(role: str, client: Any, node_keys: Any, data_dir: Path, addr: str, bootstrap: list[str] | None,
          max_rounds: int | None, miner_cheat: Any, chosen: Any, discover: str | None, server: Any,
          capacity_margin: float, log: logging.Logger) -> Any:
    from protocol.node.metrics import NodeMetrics
    from protocol.node.node_config import NodeConfig

    config = NodeConfig(data_dir=data_dir, listen=addr, bootstrap=tuple(bootstrap or ()), max_rounds=max_rounds,
                        discover=discover, discover_server=server, capacity_margin=capacity_margin,
                        hardware_class=chosen)
    if role == "miner":
        from miner.node import MinerNode

        return MinerNode(client, node_keys, config, log, cheat=miner_cheat, metrics=NodeMetrics())
    from validator.node import ValidatorNode

    return ValidatorNode(client, node_keys, config, log, metrics=NodeMetrics())


def _serve_node(node: Any, client: Any, addr: str, data_dir: Path, metrics_host: str, metrics_port: int | None,
                log: logging.Logger) -> int:
    import signal

    import trio

    from protocol.node.logs import kv
    from protocol.node.metrics_server import serving
    from protocol.node.stopping import Stopped, run_until_stopped

    with serving(node.metrics, metrics_host, metrics_port) as url:  # stopped when the node stops
        log.info("node up %s", kv(account=client.address, listen=addr, data_dir=data_dir, metrics=url or "off"))
        signum = trio.run(run_until_stopped, node.run, log)
    return 0 if signum is None else Stopped(signal.Signals(signum)).exit_code


def _discover_server(text: str | None) -> tuple[str, int] | None:
    if text is None:
        return None
    from protocol.p2p.dns_resolve import parse_server
    from protocol.p2p.errors import DnsRecordMalformed

    try:
        return parse_server(text)
    except DnsRecordMalformed as exc:
        raise ConfigError(f"--discover-server: {exc}") from exc


def _cheat(name: str | None) -> Any:
    """The adversary `--cheat` names (testing only); a miner without it imports no cheat."""
    if name is None:
        return None
    from protocol.devnet.cheats import MinerCheat

    return MinerCheat(name)


def miner(rpc: RpcOpt, deployment: DeploymentOpt, keys: KeysOpt, data_dir: DataDirOpt, listen: ListenOpt = None,
          bootstrap: BootstrapOpt = None, stake: StakeOpt = None, max_rounds: RoundsOpt = None,
          cheat: Annotated[str | None, typer.Option(hidden=True,  # tests only: kept out of an operator's help
                                                    help="Testing only: behave as this adversary")] = None,
          hardware_class: ClassOpt = None, discover: DiscoverOpt = None,
          discover_server: DiscoverServerOpt = None,
          capacity_margin: Annotated[float, typer.Option(
              min=0.05, max=1.0, help="Capacity-scaled work: train as many steps (up to the run's H) as fit in "
                                     "this share of the commit window left when training starts")] = 0.5,
          metrics_port: MetricsPortOpt = None, metrics_host: MetricsHostOpt = "127.0.0.1",
          log_format: LogFormatOpt = LogFormat.AUTO) -> None:
    """Run a miner: train each round in a worker process, commit, publish, serve."""
    _run("miner", rpc, deployment, keys, data_dir, listen, bootstrap, stake, max_rounds, cheat, hardware_class,
         discover, discover_server, capacity_margin, metrics_host, metrics_port, log_format)


def validator(rpc: RpcOpt, deployment: DeploymentOpt, keys: KeysOpt, data_dir: DataDirOpt, listen: ListenOpt = None,
              bootstrap: BootstrapOpt = None, stake: StakeOpt = None, max_rounds: RoundsOpt = None,
              hardware_class: ClassOpt = None, discover: DiscoverOpt = None,
              discover_server: DiscoverServerOpt = None, metrics_port: MetricsPortOpt = None,
              metrics_host: MetricsHostOpt = "127.0.0.1", log_format: LogFormatOpt = LogFormat.AUTO) -> None:
    """Run a validator: replay challenged segments, score, report fraud, vote, finalize, attest."""
    _run("validator", rpc, deployment, keys, data_dir, listen, bootstrap, stake, max_rounds,
         hardware_class=hardware_class, discover=discover, discover_server=discover_server,
         metrics_host=metrics_host, metrics_port=metrics_port, log_format=log_format)


def start(rpc: RpcOpt, deployment: DeploymentOpt, keys: KeysOpt) -> None:
    """Open round 0 (anyone may, once miners and validators are staked)."""
    client, _ = node_client(rpc, deployment, keys)
    client.start()
    typer.echo("round 0 opened")


def install(app: typer.Typer, wrap: Any) -> None:
    for fn in (miner, validator, start):
        app.command()(wrap(fn))
