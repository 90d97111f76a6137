"""A node's start-up checks and first transactions, in the order `veritrain miner | validator`
runs them (protocol/cli/node.py): every input first, then the account's registration and stake."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

from protocol.cli.usage import BadUsage
from protocol.config.atomic import atomic_write
from protocol.core.errors import ConfigError, InsufficientFunds


def check_multiaddr(text: str | None, flag: str) -> str | None:
    """`text` when it is a libp2p TCP multiaddr (a usage error, exit 2, when not)."""
    if text is None:
        return None
    from protocol.p2p.host import split_multiaddr

    try:
        addr, _ = split_multiaddr(text)
    except ValueError as exc:  # multiaddr's parse errors are ValueErrors
        raise BadUsage(f"{flag} {text!r} is not a multiaddr (e.g. /ip4/203.0.113.7/tcp/4001): {exc}") from None
    if "/tcp/" not in str(addr):
        raise BadUsage(f"{flag} {text!r} names no TCP port (e.g. /ip4/203.0.113.7/tcp/4001)")
    return text


def listen_addr(listen: str | None, data_dir: Path) -> str:
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


def remember_listen(data_dir: Path, addr: str) -> None:
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


def register_and_stake(role: str, client: Any, node_keys: Any, keys: Path, listen: str, target: int | None,
                       classes: int | None, data_dir: Path, steps: Any, check: Any) -> None:
    """Register (role, node key, address, the hardware class set `classes` when given, a
    validator's BLS key) where the chain does not hold it already (`check`, made by
    protocol/node/account_guard.py), then top the stake up to its target
    (protocol/core/settlement/stake_target.py)."""
    from protocol.chain.client import Role
    from protocol.chain.registration import register_node

    want = Role[role.upper()]
    if check.found:
        steps.step("registration found", role=role, listen=listen)
    else:
        if check.replaces is None:
            steps.step("registering", role=role, listen=listen)
        else:
            steps.step("moving the registration", role=role, listen=listen, replaces=check.replaces)
        register_node(client, want, node_keys.identity, listen)
    if classes is not None:
        register_classes(client, classes)
    if want == Role.VALIDATOR:
        from protocol.chain.bls_registration import ensure_bls_key

        if node_keys.bls is None:
            raise ConfigError(f"{keys} holds no BLS key; a validator signs results with one (veritrain keys new)")
        ensure_bls_key(client, node_keys.bls)
    if target is not None:
        _top_up(client, target, data_dir, steps)


def check_stake(role: str, client: Any, data_dir: Path, target: int | None) -> None:
    """Refuse, before anything is sent, a stake target under the role's minimum (the node would
    never be eligible) or one the account's tokens cannot reach."""
    if target is None:
        return
    from protocol.cli.human import tokens
    from protocol.config.run_config import TOKEN_UNIT
    from protocol.node.stake_target import STAKE_TARGET_KEY, planned_stake
    from protocol.node.store import NodeState

    chain = client.deployment.run_config.chain
    minimum = (chain.min_miner_stake if role == "miner" else chain.min_validator_stake) * TOKEN_UNIT
    if target < minimum:
        raise ConfigError(f"--stake {tokens(target)} is below the run's minimum {role} stake of {tokens(minimum)}: "
                          "the node would never be eligible")
    if role == "validator":
        check_permit_room(client, target)
    saved = None
    if (data_dir / "state.sqlite").is_file():  # read, not made: nothing is written before the checks pass
        state = NodeState(data_dir / "state.sqlite")
        try:
            saved = state.get(STAKE_TARGET_KEY)
        finally:
            state.close()
    needed, held = planned_stake(client, saved, target), client.token_balance(client.address)
    if needed > held:
        raise InsufficientFunds(f"staking up to {tokens(target)} needs {tokens(needed)} more tokens, and account "
                                f"{client.address} holds {tokens(held)}: lower --stake, or send it tokens")


def check_permit_room(client: Any, target: int) -> None:
    """Refuse a validator stake that a full permitted set would refuse (`Staking.stake`): a
    newcomer gets in only with more than the smallest listed stake, which it then evicts."""
    from protocol.chain.client import Role
    from protocol.cli.human import tokens

    staking = client.read.staking
    if staking.eligible_role(client.address) == Role.VALIDATOR:
        return
    listed = staking.permitted_validators()
    if len(listed) < staking.max_permits():
        return
    smallest = min(staking.stake_of(v) for v in listed)
    if target <= smallest:
        raise ConfigError(f"all {len(listed)} validator permits of this run are held and the smallest holder stakes "
                          f"{tokens(smallest)}: --stake must exceed it (that holder is then evicted), or wait until "
                          "a permit frees")


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


def register_classes(client: Any, classes: int) -> None:
    """Register the class set, which the chain fixes at the first stake: a staked account
    running another class is refused here, before the node checks anything wrongly."""
    from protocol.config.run_setup import resolve
    from protocol.core.settlement.class_checks import effective_classes

    registered = client.read.staking.hardware_classes(client.address)
    if effective_classes(registered) == classes:
        return
    if client.read.staking.classes_fixed(client.address):
        held = _held_labels(resolve(client.deployment.run_config), effective_classes(registered))
        raise ConfigError(f"account {client.address} is registered for hardware class {held}, fixed since it "
                          f"first staked; run that class (--hardware-class) or use another account")
    client.set_hardware_classes(classes)


def _held_labels(setup: Any, mask: int) -> str:
    """The classes an on-chain class set names, by label; a staged run's with their stage."""
    from protocol.core.hardware.hardware_class import classes_in, label

    if not setup.spec.stages:
        return ", ".join(label(c) for c in classes_in(setup.classes, mask))
    from protocol.core.hardware.stage_classes import stage_classes_in

    pairs = stage_classes_in(setup.classes, setup.stage_permitted, mask)
    return ", ".join(f"{label(c)} on stage {s}" for c, s in pairs)


def node_classes(deployment: Path, wanted: str | None, stage: int | None = None) -> tuple[int, Any]:
    """The class set this node registers and the class it runs (`wanted`, else the run's
    default). Refuses a class the run does not permit or this machine cannot run. In a staged
    run (PROTOCOL.md §16.1) a miner passes its `stage` and registers its class on that stage
    alone; a validator passes none and registers its class on every stage that permits it."""
    from protocol.chain.deployment import load_deployment
    from protocol.config.run_setup import training_spec
    from protocol.core.hardware.hardware_class import class_mask
    from protocol.node.hardware_choice import choose_class

    config = load_deployment(deployment).run_config
    spec = training_spec(config)
    chosen = choose_class(spec, wanted)
    if spec.stages or stage is not None:
        return _stage_mask(config, chosen, stage), chosen
    return class_mask(spec.classes, [chosen]), chosen


def _stage_mask(config: Any, chosen: Any, stage: int | None) -> int:
    # resolve, not the bare spec: it also refuses a run whose (class, stage) pairs overflow the chain's set
    from protocol.config.run_setup import resolve
    from protocol.core.hardware.stage_classes import miner_mask, validator_mask

    setup = resolve(config)
    if not setup.spec.stages:
        raise ConfigError(f"stage {stage}: this run has no stages ([training] stages = 0)")
    if stage is None:
        return validator_mask(setup.classes, setup.stage_permitted, chosen)
    return miner_mask(setup.classes, setup.stage_permitted, chosen, stage)


def check_stage_flag(role: str, deployment: Path, stage: int | None) -> None:
    """A staged run's miner names its stage (`--stage`); nobody else does."""
    from protocol.chain.deployment import load_deployment
    from protocol.config.run_setup import training_spec

    stages = training_spec(load_deployment(deployment).run_config).stages
    if role == "miner" and stages and stage is None:
        raise ConfigError(f"this run splits the model into {stages} stages: give the stage this miner trains "
                          f"(--stage 0 to {stages - 1}; `veritrain hardware` says which this machine holds)")
    if stage is not None and role != "miner":
        raise ConfigError("--stage is a stage miner's: a validator checks every stage of its class")
    if stage is not None and not 0 <= stage < max(stages, 1):
        raise ConfigError(f"--stage {stage}: this run has " + (f"stages 0 to {stages - 1}" if stages else
                                                               "no stages ([training] stages = 0)"))


def discover_server(text: str | None) -> tuple[str, int] | None:
    if text is None:
        return None
    from protocol.p2p.dns_resolve import parse_server
    from protocol.p2p.errors import DnsRecordMalformed

    try:
        return parse_server(text)
    except DnsRecordMalformed as exc:
        raise ConfigError(f"--discover-server: {exc}") from exc


def miner_cheat(name: str | None) -> Any:
    """The adversary `--cheat` names (testing only); a miner without it imports no cheat."""
    if name is None:
        return None
    from protocol.devnet.cheats import MinerCheat

    return MinerCheat(name)


