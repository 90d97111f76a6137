"""`veritrain devnet`: a whole network in one process, on the embedded chain.

The chain is eth-tester mined once a second on the wall clock (protocol/chain/devchain.py);
every miner and validator is its own node object with its own libp2p host on 127.0.0.1
and its own worker process for training and replay. Cheating miners use the adversaries
of protocol/devnet/cheats.py; lazy and silent validators those of protocol/devnet/lazy_validator.py
and protocol/devnet/silent_validator.py.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import socket
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import trio

from miner.node import MinerNode
from miner.stage_node import StageMinerNode
from protocol.chain.bls_registration import ensure_bls_key
from protocol.chain.claims import claim_owed
from protocol.chain.client import ChainClient, Role
from protocol.chain.deploy import deploy
from protocol.chain.devchain import DevChain
from protocol.chain.registration import register_node
from protocol.chain.settlement_history import SettlementHistory
from protocol.config.run_config import TOKEN_UNIT, ChainParams, GenesisAllocation, RunConfig
from protocol.config.run_setup import TrainingSpec, resolve
from protocol.core.crypto.bls import bls_keygen
from protocol.core.crypto.signing import NodeIdentity
from protocol.core.errors import ConfigError, VeritrainError
from protocol.core.hardware.hardware_class import class_mask, label
from protocol.core.hardware.replay_profile import ReplayProfile
from protocol.core.hardware.stage_classes import miner_mask, validator_mask
from protocol.core.settlement.committee_odds import committee_per_check
from protocol.core.train.compute_config import ComputeConfig
from protocol.devnet.cheats import CHEATS, MinerCheat
from protocol.devnet.lazy_aggregator import NAME as LAZY_AGGREGATOR
from protocol.devnet.lazy_aggregator import tamper_of
from protocol.devnet.lazy_validator import LazyValidator
from protocol.devnet.lying_validator import LyingValidator
from protocol.devnet.progress import phase_line
from protocol.devnet.silent_validator import SilentValidator
from protocol.devnet.staged import STAGE_CHEATS, check_staged, stage_cheat_of
from protocol.devnet.until_drawn import RoundPlan
from protocol.node.hardware_choice import choose_class
from protocol.node.keys import LocalAccount, NodeKeys
from protocol.node.node_config import NodeConfig
from protocol.node.pinning import prepare
from protocol.node.round_notes import ROUND_DONE_KEY
from protocol.node.worker_pool import ProfileWorker
from validator.cheat import ValidatorCheat
from validator.node import ValidatorNode

Progress = Callable[[str], None]
FALSE_CLASS = "false-class"  # a validator registered for a class it does not run (testing only)
THROTTLED = "throttled"  # an honest miner on a machine a third as fast, at most 8 steps/s (it sleeps after each step)
THROTTLE = 3.0
TAIL_S = 60.0  # how long a finished devnet waits for validators to settle the last round's demand bonds
# validator kinds: never replays; never reveals nor signs; reveals wrong scores
LAZY, SILENT, LYING = LazyValidator().name, SilentValidator().name, LyingValidator().name


class DevnetIncomplete(VeritrainError):
    """Raised when the devnet does not complete its rounds within its time limit."""


# factories: a cheat may keep a round's state, so each node gets its own
CHEATING_VALIDATORS: dict[str, Callable[[], ValidatorCheat]] = {LAZY: LazyValidator, LYING: LyingValidator}


@dataclass(frozen=True)
class DevnetOptions:
    miners: int = 4
    validators: int = 3
    rounds: int = 5
    cheaters: tuple[tuple[str, float | None], ...] = ()  # (kind, fraction of segments faked)
    lazy_validators: int = 0  # of `validators`, how many never replay (they are audited and slashed)
    silent_validators: int = 0  # of `validators`, how many commit but never reveal nor sign (they earn nothing)
    lying_validators: int = 0  # of `validators`, how many reveal a wrong score for every miner they check (audited, slashed)
    # of `validators`, how many serve a wrong partial sum on every aggregation-tree node they are drawn for
    lazy_aggregators: int = 0
    probe_demands: bool = False  # the first honest validator demands a part of each agreed result (validator/probe.py)
    throttled: int = 0  # of the honest `miners`, how many train at a third of the speed (capacity-scaled work)
    # hardware classes (labels or ids), cycled over the miners and over the validators; empty: the run's profile
    miner_classes: tuple[str, ...] = ()
    validator_classes: tuple[str, ...] = ()
    # of the validators, how many (the last) register their class but replay under the run's profile
    # (testing only: their false reports are rejected by the class's honest holders, costing their bonds)
    false_class_validators: int = 0
    preset: str = "tiny"
    out: Path = Path("out/devnet")
    data_root: Path | None = None  # node data dirs; a temp dir when None
    training: dict = field(default_factory=dict)  # extra [training] keys (tests: small H)
    chain: dict = field(default_factory=dict)  # ChainParams overrides
    timeout_s: float = 1800.0  # the run fails (non-zero exit) if the rounds are not done by then
    stages: int = 0  # a staged run (PROTOCOL.md §16): S stages, `pipelines` stage miners each; 0: whole-model miners
    pipelines: int = 0

    @property
    def miner_count(self) -> int:
        """Every miner, cheaters included: a staged run's cheaters hold stage seats of their own."""
        return self.stages * self.pipelines if self.stages else self.miners + len(self.cheaters)


def parse_cheaters(text: str | None) -> tuple[tuple[str, float | None], ...]:
    """`lazy,withhold:0.3` -> (("lazy", None), ("withhold", 0.3))."""
    out: list[tuple[str, float | None]] = []
    for item in filter(None, (text or "").split(",")):
        kind, _, frac = item.strip().partition(":")
        if kind not in CHEATS and kind not in STAGE_CHEATS:
            raise ConfigError(f"unknown cheater kind {kind!r}; choose from {', '.join((*CHEATS, *STAGE_CHEATS))}")
        try:
            fraction = float(frac) if frac else None
        except ValueError as exc:
            raise ConfigError(f"cheater fraction must be a number, got {frac!r}") from exc
        if fraction is not None and not 0 < fraction <= 1:
            raise ConfigError("cheater fraction must be in (0, 1]")
        out.append((kind, fraction))
    return tuple(out)


@dataclass
class Member:
    role: Role
    kind: str  # "honest" or a cheat name
    keys: NodeKeys
    client: ChainClient
    listen: str = field(default_factory=lambda: f"/ip4/127.0.0.1/tcp/{free_port()}")
    node: MinerNode | ValidatorNode | None = None
    profile: ReplayProfile | None = None  # the hardware class it runs (None: the run's profile)
    stage: int | None = None  # a stage miner's stage (a staged run)
    claimed: ReplayProfile | None = None  # the class it registers, when not the one it runs (false-class)

    @property
    def class_label(self) -> str | None:
        return None if self.profile is None else label(self.profile)

    @property
    def address(self) -> str:
        return self.keys.account.address

    @property
    def name(self) -> str:
        assert self.node is not None
        return self.node.log.name.removeprefix("veritrain.")


def free_port() -> int:
    """A free loopback port, so each node registers its real address once, before it starts."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def run_config_for(opts: DevnetOptions, accounts: list[LocalAccount]) -> RunConfig:
    # generous deadlines cost nothing while every node keeps up (phases close early once all
    # have acted) and keep a busy laptop from missing a phase; the challenge window is waited out
    chain = {"commit_duration": 300, "score_duration": 300, "reveal_duration": 60, "audit_duration": 60, "challenge_window": 60,
             "result_duration": 90, "result_challenge_window": 16, "unbonding_delay": 900, "emission_per_round": 1000,
             **opts.chain}
    # one devnet validator (it stakes the minimum + 100) covers a hardware class, so each class
    # that has a validator is checked exactly
    chain.setdefault("min_class_stake", chain.get("min_validator_stake", ChainParams().min_validator_stake) + 100)
    committee = chain.get("committee", ChainParams().committee)
    staged = {"stages": opts.stages} if opts.stages else {}
    training = _with_committee_checks({"preset": opts.preset, **staged, **opts.training}, committee)
    genesis = [GenesisAllocation(address=a.address, amount=10_000) for a in accounts]
    return RunConfig(run_name="devnet", chain=ChainParams(**chain), training=training, genesis=genesis)


def _with_committee_checks(training: dict, committee: int) -> dict:
    """`training` with q raised, when q is not given, to the fewest segments per check at which
    committees of `committee` seats keep the detection odds the run config demands
    (`committee_odds.committee_per_check`: 2 below three seats, else 1)."""
    compute = dict(training.get("compute", {}))
    if committee == 0 or "segments_per_validator" in compute:
        return training
    cfg = ComputeConfig(**compute)
    q = max(cfg.segments_per_validator, committee_per_check(committee, cfg.n_segments))
    return {**training, "compute": {**compute, "segments_per_validator": q}}


def _register(member: Member, stake_tokens: int) -> None:
    client = member.client
    register_node(client, member.role, member.keys.identity, member.listen)
    setup = resolve(client.deployment.run_config)
    spec, profile = setup.spec, member.claimed or member.profile or setup.spec.profile
    if not spec.stages:
        client.set_hardware_classes(class_mask(spec.classes, [profile]))
    elif member.stage is not None:
        client.set_hardware_classes(miner_mask(spec.classes, setup.stage_permitted, profile, member.stage))
    else:
        client.set_hardware_classes(validator_mask(spec.classes, setup.stage_permitted, profile))
    if member.keys.bls is not None:
        ensure_bls_key(client, member.keys.bls)
    client.stake(stake_tokens * TOKEN_UNIT)


def _cycle(spec: TrainingSpec, wanted: tuple[str, ...], count: int) -> list[ReplayProfile]:
    """`count` nodes' classes: `wanted` (labels or ids) cycled, each permitted and runnable
    here; the run's profile when `wanted` is empty."""
    chosen = [choose_class(spec, w) for w in wanted] or [spec.profile]
    return [chosen[i % len(chosen)] for i in range(count)]


def setup_network(opts: DevnetOptions, progress: Progress,
                  workers: list[ProfileWorker]) -> tuple[DevChain, ChainClient, list[Member]]:
    """Chain, contracts and accounts. `workers` receives one started worker per node: they
    import torch while the hashes are pinned (in the first one) and the contracts deploy."""
    check_staged(opts)
    n_miners = opts.miner_count
    chain = DevChain(funded_accounts=n_miners + opts.validators)
    accounts = chain.node_accounts()[: n_miners + opts.validators]
    config = run_config_for(opts, accounts)
    spec = resolve(config).spec
    claimed = _cycle(spec, opts.miner_classes, n_miners) + _cycle(spec, opts.validator_classes, opts.validators)
    false_from = len(claimed) - opts.false_class_validators  # these register a class but run the run's profile
    profiles = [spec.profile if i >= false_from else p for i, p in enumerate(claimed)]
    workers += [ProfileWorker(p).start() for p in profiles]
    progress("pinning model, dataset and replay-profile hashes")
    config = prepare(config, workers[0])
    progress("deploying contracts on the embedded chain")
    deployment = deploy(chain.handle, chain.deployer, config, progress=lambda m: None)
    admin = ChainClient(chain.handle, deployment, chain.deployer)
    honest_miners = n_miners - len(opts.cheaters) if opts.stages else opts.miners
    kinds = ["honest"] * (honest_miners - opts.throttled) + [THROTTLED] * opts.throttled + [k for k, _ in opts.cheaters]
    members = [Member(Role.MINER, kind, NodeKeys(a, NodeIdentity.generate()), admin.with_account(a))
               for kind, a in zip(kinds, accounts[:n_miners], strict=True)]
    for i, (member, p) in enumerate(zip(members, profiles, strict=False)):
        member.profile = p
        member.stage = i % opts.stages if opts.stages else None
    honest = (opts.validators - opts.lazy_validators - opts.silent_validators - opts.lying_validators
              - opts.lazy_aggregators)
    v_kinds = (["honest"] * honest + [LAZY] * opts.lazy_validators + [SILENT] * opts.silent_validators
               + [LYING] * opts.lying_validators + [LAZY_AGGREGATOR] * opts.lazy_aggregators)
    members += [Member(Role.VALIDATOR, kind, NodeKeys(a, NodeIdentity.generate(), bls_keygen(os.urandom(32))),
                       admin.with_account(a))
                for kind, a in zip(v_kinds, accounts[n_miners:], strict=True)]
    for member, p in zip(members[n_miners:], profiles[n_miners:], strict=True):
        member.profile = p
    for member, claim in zip(members, claimed, strict=True):
        if claim != member.profile:
            member.kind, member.claimed = FALSE_CLASS, claim
    chain.start()
    return chain, admin, members


def register_all(members: list[Member], progress: Progress) -> None:
    """Every node registers and stakes, in parallel (one account each)."""
    cfg = members[0].client.deployment.run_config.chain
    n_miners = sum(m.role == Role.MINER for m in members)
    progress(f"registering {n_miners} miners and {len(members) - n_miners} validators")
    stakes = {Role.MINER: cfg.min_miner_stake + 100, Role.VALIDATOR: cfg.min_validator_stake + 100}
    # a false-class validator stakes the minimum: its class's honest holders outweigh it
    _in_parallel([functools.partial(_register, m, stakes[m.role] - 100 * (m.kind == FALSE_CLASS)) for m in members])


def _in_parallel(calls: list[Callable[[], object]]) -> None:
    errors: list[BaseException] = []

    def run(call: Callable[[], object]) -> None:
        try:
            call()
        except BaseException as exc:  # re-raised below, on the caller's thread
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(c,)) for c in calls]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def build_nodes(opts: DevnetOptions, members: list[Member], data_root: Path, workers: list[ProfileWorker]) -> None:
    fractions = dict(opts.cheaters)
    first_honest = next((m for m in members if m.role == Role.VALIDATOR and m.kind == "honest"), None)
    for i, m in enumerate(members):
        log = logging.getLogger(f"veritrain.{m.role.name.lower()}{i}")
        cfg = NodeConfig(data_dir=data_root / f"node{i}", listen=m.listen, max_rounds=opts.rounds,
                         slowdown=THROTTLE if m.kind == THROTTLED else 1.0, hardware_class=m.profile)
        if m.role == Role.MINER and m.stage is not None:
            cfg = dataclasses.replace(cfg, stage=m.stage)
            m.node = StageMinerNode(m.client, m.keys, cfg, log, cheat=stage_cheat_of(m.kind))
        elif m.role == Role.MINER:
            cheat = None if m.kind in ("honest", THROTTLED) else MinerCheat(m.kind, fractions.get(m.kind))
            m.node = MinerNode(m.client, m.keys, cfg, log, cheat=cheat)
        else:
            m.node = ValidatorNode(m.client, m.keys, cfg, log, cheat=_cheat_of(m.kind),
                                   silence=SilentValidator() if m.kind == SILENT else None,
                                   probe=opts.probe_demands and m is first_honest)
            if m.kind == LAZY_AGGREGATOR:
                m.node.tree.tamper = tamper_of(m.node)
        m.node.prestarted_worker = workers[i]


def _cheat_of(kind: str) -> ValidatorCheat | None:
    make = CHEATING_VALIDATORS.get(kind)
    return None if make is None else make()


async def run_nodes(admin: ChainClient, members: list[Member], plan: RoundPlan, progress: Progress,
                    timeout_s: float) -> dict[str, str]:
    """Run every node until `plan.rounds` rounds have settled: {node name: error} for nodes that crashed."""
    crashed: dict[str, str] = {}
    with trio.fail_after(timeout_s):
        async with trio.open_nursery() as nursery:
            for m in members:
                nursery.start_soon(_guarded, m, crashed, progress)
            # the nodes boot (worker processes, hosts) while their accounts register
            await trio.to_thread.run_sync(register_all, members, progress)
            await trio.to_thread.run_sync(admin.start)
            last = ""
            accounts = {role: [m.client.address for m in members if m.role == role] for role in Role}
            while (r := await trio.to_thread.run_sync(admin.current_round)) < plan.rounds:
                _check_quorum(members, crashed)
                line = await trio.to_thread.run_sync(phase_line, admin, accounts, r, plan.rounds)
                if line != last:
                    progress(line)
                    last = line
                await trio.sleep(1.0)
            progress("resolving the last fraud reports")
            while await trio.to_thread.run_sync(_open_reports, admin):
                _check_quorum(members, crashed)
                await trio.sleep(1.0)
            await _validators_through(members, crashed, plan.rounds - 1)
            nursery.cancel_scope.cancel()
    return crashed


async def _validators_through(members: list[Member], crashed: dict[str, str], last: int) -> None:
    """Wait, at most TAIL_S, until every live validator is through round `last`: after the round
    is final it still settles its demand bonds (`settle_demand`), which stopping at once would cut."""
    live = [m for m in members if m.role == Role.VALIDATOR and m.name not in crashed and m.node is not None]
    with trio.move_on_after(TAIL_S):
        while any((m.node.data.state.get(ROUND_DONE_KEY) or -1) < last for m in live):  # type: ignore[union-attr]
            await trio.sleep(0.5)


async def _guarded(member: Member, crashed: dict[str, str], progress: Progress) -> None:
    """One node's crash is logged and reported, but the network goes on without it, as a
    real one would."""
    assert member.node is not None
    try:
        await member.node.run()
    except Exception as exc:
        member.node.log.exception("node crashed")
        crashed[member.name] = f"{type(exc).__name__}: {exc}"
        progress(f"{member.name} crashed: {crashed[member.name]}")


def _check_quorum(members: list[Member], crashed: dict[str, str]) -> None:
    for role in (Role.MINER, Role.VALIDATOR):
        names = [m.name for m in members if m.role == role]
        if all(n in crashed for n in names):
            detail = "; ".join(f"{n}: {crashed[n]}" for n in names)
            raise DevnetIncomplete(f"every {role.name.lower()} crashed, the rounds cannot finish ({detail})")


def _open_reports(admin: ChainClient) -> int:
    """Reports still open; validators resolve them once their challenge window closes."""
    count = admin.read.disputes.report_count()
    return sum(1 for rid in range(1, count + 1) if admin.report(rid)["status"] == 1)


class DevnetRun(NamedTuple):
    admin: ChainClient
    members: list[Member]
    crashed: dict[str, str]  # {node: error} for the nodes that crashed
    rounds: int  # as run: more than asked while a lazy aggregator was undrawn (`until_drawn.py`)


def run_devnet(opts: DevnetOptions, progress: Progress) -> DevnetRun:
    """Set up and run the network."""
    workers: list[ProfileWorker] = []
    try:
        chain, admin, members = setup_network(opts, progress, workers)
    except BaseException:
        _in_parallel([w.close for w in workers])
        raise
    try:
        with tempfile.TemporaryDirectory(prefix="veritrain-devnet-") as tmp:
            build_nodes(opts, members, opts.data_root or Path(tmp), workers)
            plan = RoundPlan(opts.rounds, members, [m for m in members if m.kind == LAZY_AGGREGATOR], progress)
            try:
                crashed = trio.run(run_nodes, admin, members, plan, progress, opts.timeout_s)
            except trio.TooSlowError as exc:
                raise DevnetIncomplete(f"the devnet did not finish {plan.rounds} rounds in {opts.timeout_s:.0f}s") from exc
            progress("claiming rewards")
            history = SettlementHistory(admin)  # one replay of the chain serves every claim
            _in_parallel([functools.partial(claim_owed, m.client, history) for m in members if m.name not in crashed])
    finally:
        chain.stop()
        _in_parallel([w.close for w in workers])  # nodes close theirs; these are the ones that never ran
    return DevnetRun(admin, members, crashed, plan.rounds)
