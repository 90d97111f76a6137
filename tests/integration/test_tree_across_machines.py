"""The aggregation tree across machines: the same network as an in-process devnet, each node a
separate `veritrain miner|validator` process in its own network namespace (tests/integration/
netns.py: its own address on a bridge, its link shaped to 100 Mbit/s, its own folder), the chain
anvil on the bridge. Both runs use the same accounts (the devnet's; each machine writes its
keystore with `veritrain keys new --account-key`), the same [training] (micro, fan-in 2: 4 leaves,
then 2 nodes, then the root) and pinned steps (`min_inner_steps` = H, so every miner trains H
whatever its speed). With 3 validators each node's two servers leave one validator that fetches it
from another machine by the hash both announced (audits off, so that it does).

Asserted: every round settles on anvil with every update verified; the model hash the validators
certified for each round is the devnet's, bit for bit; every validator summed its tree and, over
the rounds, fetched nodes another machine served; no node logged a traceback.

Namespaces need root: without them the test is skipped, under CI (CI=true) it fails.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator

import pytest

from protocol.chain.devchain import DevChain
from protocol.devnet.network import DevnetOptions, run_devnet
from tests.conftest import stop_process
from tests.integration.json_log import records
from tests.integration.lab_net import Machines, anvil_on, lab_of
from tests.integration.netutil import reader, stop_all, wait_for

pytestmark = [pytest.mark.anvil, pytest.mark.slow]

PASSWORD = "tree across machines"
PORT, RPC_PORT = 4001, 8545
MINERS, VALIDATORS, ROUNDS = 4, 3, 2
H = 12  # steps every miner trains: min_inner_steps = inner_steps pins them
TRAINING = {"preset": "micro", "fan_in": 2,
            "compute": {"inner_steps": H, "checkpoint_every": 3, "min_inner_steps": H}}
# audits off: at 3 nodes and 3 validators the ⌈3 · 3 / 3⌉ audits cover every node a validator does
# not serve, so it would recompute them all and fetch nothing (tests/validator/test_tree_aggregation.py
# runs the audits)
CHAIN = {"commit_duration": 90, "score_duration": 120, "reveal_duration": 60, "audit_duration": 30,
         "challenge_window": 15, "result_duration": 60, "result_challenge_window": 5, "unbonding_delay": 600,
         "tree_audits": 0}
STAKE = {"miner": "200", "validator": "300"}  # as the devnet's: the minimum + 100
TIMEOUT_S = 480  # the anvil network's rounds; about 150 s on 2 idle cores


def run_toml() -> str:
    chain = "\n".join(f"{k} = {v}" for k, v in CHAIN.items())
    compute = "\n".join(f"{k} = {v}" for k, v in TRAINING["compute"].items())  # type: ignore[attr-defined]
    return (f'run_name = "tree-across-machines"\n[chain]\n{chain}\nmin_class_stake = 300\n'
            f'[training]\npreset = "micro"\nfan_in = 2\n[training.compute]\n{compute}\n')


class Net(Machines):
    def cli(self, *args: str, on: str | None = None, timeout: float = 300) -> str:
        """`veritrain ARGS` in the deployer's folder, or inside machine `on` from its own."""
        cmd, cwd = [sys.executable, "-m", "protocol.cli.app", *args], self.tmp / "deployer"
        if on is not None:
            cmd, cwd = self.machine(on).command(cmd), self.home(on)
        done = subprocess.run(cmd, cwd=cwd, env={**os.environ, "VERITRAIN_PASSWORD": PASSWORD, "COLUMNS": "200"},
                              capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        assert done.returncode == 0, f"veritrain {' '.join(args)} (exit {done.returncode}):\n{done.stderr[-3000:]}"
        return done.stdout

    def start_node(self, name: str) -> None:
        role = "validator" if name.startswith("v") else "miner"
        m = self.machine(name)
        args = [role, "--rpc", self.rpc, "--deployment", "deployment.json", "--keys", "keys", "--data-dir", "data",
                "--stake", STAKE[role], "--listen", f"/ip4/{m.address}/tcp/{PORT}", "--max-rounds", str(ROUNDS)]
        env = {k: v for k, v in os.environ.items() if k != "VERITRAIN_LOG_FORMAT"} | {"VERITRAIN_PASSWORD": PASSWORD}
        with self.log(name).open("w") as err:
            self.procs[name] = subprocess.Popen(
                m.command([sys.executable, "-m", "protocol.cli.app", *args]), cwd=self.home(name), env=env,
                stdout=subprocess.DEVNULL, stderr=err, stdin=subprocess.DEVNULL, start_new_session=True)

    def wait(self, predicate, timeout_s: float, what: str) -> None:  # type: ignore[no-untyped-def]
        wait_for(predicate, timeout_s, what, list(self.procs.values()), [self.log(n) for n in self.procs])

    def close(self) -> list[str]:
        stop_all(list(self.procs.values()))
        if self.anvil is not None:
            stop_process(self.anvil)
        return self.lab.close()


def names() -> list[str]:
    return [f"m{i + 1}" for i in range(MINERS)] + [f"v{i + 1}" for i in range(VALIDATORS)]


def devnet_keys() -> list[bytes]:
    """The devnet's node accounts' private keys, miners first (`setup_network` takes them in order)."""
    chain = DevChain(funded_accounts=MINERS + VALIDATORS)
    return [bytes(a.key) for a in chain.node_accounts()[: MINERS + VALIDATORS]]


def _keys_and_deploy(net: Net) -> None:
    deployer = net.tmp / "deployer"
    deployer.mkdir()
    (deployer / "run.toml").write_text(run_toml())
    made = {}
    for name, key in zip(names(), devnet_keys(), strict=True):
        net.home(name).mkdir()
        (net.home(name) / "account.key").write_text(key.hex())
        made[name] = subprocess.Popen(
            net.machine(name).command([sys.executable, "-m", "protocol.cli.app", "keys", "new", "--out", "keys",
                                       "--account-key", "account.key"]),
            cwd=net.home(name), env={**os.environ, "VERITRAIN_PASSWORD": PASSWORD},
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    for name, proc in made.items():  # in parallel: each takes a second or two of scrypt
        assert proc.wait(timeout=120) == 0, f"keys new on {name}: {proc.stderr.read() if proc.stderr else ''}"
        (net.home(name) / "account.key").unlink()
        net.accounts[name] = net.cli("keys", "show", "--keys", "keys", on=name).strip()
    funding = [a for n in names() for a in ("--fund", net.accounts[n])]
    net.cli("deploy", "--rpc", net.rpc, "--dev-account", "--config", "run.toml", "--out", "deployment.json",
            "--fund-eth", "1", "--fund-tokens", "1000", *funding)
    for name in names():
        shutil.copy(deployer / "deployment.json", net.home(name) / "deployment.json")


def _run(net: Net) -> None:
    chain = reader(net.rpc, net.tmp / "deployer" / "deployment.json")
    for name in names():
        net.start_node(name)
    net.wait(lambda: chain.call("staking", "eligible_miner_count") == MINERS
             and chain.call("staking", "validator_count") == VALIDATORS, 240, "every node to register and stake")
    net.cli("start", "--rpc", net.rpc, "--deployment", "deployment.json", "--keys", "keys", on="m1")
    net.wait(lambda: all(p.poll() is not None for p in net.procs.values()), TIMEOUT_S, f"{ROUNDS} rounds")


@pytest.fixture(scope="module")
def machines(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Net]:
    tmp = tmp_path_factory.mktemp("tree-machines")
    net = Net(tmp, lab_of(names()))
    try:
        net.rpc, net.anvil = anvil_on(net.lab, RPC_PORT)
        _keys_and_deploy(net)
        _run(net)
        yield net
    finally:
        errors = net.close()
        assert not errors, errors


@pytest.fixture(scope="module")
def devnet(tmp_path_factory: pytest.TempPathFactory) -> list[bytes]:
    """The in-process devnet's certified model hash of each round (θ_1, θ_2)."""
    opts = DevnetOptions(miners=MINERS, validators=VALIDATORS, rounds=ROUNDS, preset="micro",
                         training={k: v for k, v in TRAINING.items() if k != "preset"}, chain=CHAIN,
                         out=tmp_path_factory.mktemp("tree-devnet"), timeout_s=TIMEOUT_S)
    admin, _, crashed, rounds = run_devnet(opts, lambda line: None)
    assert not crashed and rounds == ROUNDS
    return [bytes(admin.read.rounds.model_hash(r + 1)) for r in range(ROUNDS)]


def test_every_round_settles_with_every_update_verified(machines: Net) -> None:
    chain = reader(machines.rpc, machines.tmp / "deployer" / "deployment.json")
    for r in range(ROUNDS):
        assert chain.call("rounds", "finalized", r), f"round {r} did not finalize"
        assert not chain.fallback(r), f"round {r} fell back"
    for name in names():
        assert "Traceback" not in machines.log(name).read_text(), machines.tails()


def test_the_certified_models_are_the_devnets(machines: Net, devnet: list[bytes]) -> None:
    chain = reader(machines.rpc, machines.tmp / "deployer" / "deployment.json")
    across = [bytes(chain.call("rounds", "model_hash", r + 1)) for r in range(ROUNDS)]
    assert across == devnet


def test_every_validator_summed_its_tree_and_fetched_what_others_served(machines: Net) -> None:
    fetched = 0
    for name in names()[MINERS:]:
        summed = [e for e in records(machines.log(name)) if e["event"] == "tree summed"]
        assert sorted(e["round"] for e in summed) == list(range(ROUNDS)), name
        assert all(e["leaves"] == MINERS and e["depth"] == 2 for e in summed), summed
        fetched += sum(e["fetched"] for e in summed)
    assert fetched > 0  # a node summed on one machine reached another by its hash


def test_every_miner_fetched_the_certified_model_by_its_hash(machines: Net) -> None:
    chain = reader(machines.rpc, machines.tmp / "deployer" / "deployment.json")
    theta_1 = bytes(chain.call("rounds", "model_hash", 1)).hex()[:12]
    for name in names()[:MINERS]:  # θ_1 from another machine, not summed from the round's updates
        assert any(e["event"] == "global state fetched from peers" and e["round"] == 1 and e["model"] == theta_1
                   for e in records(machines.log(name))), name
