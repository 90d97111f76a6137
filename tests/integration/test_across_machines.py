"""docs/OPERATORS.md §10.1 "Running on your own data" and §10.2 "Running across machines", run
as written: the commands below are the ones the docs show, with the same flags.

Every node is its own machine: a Linux network namespace on a bridge (tests/integration/netns.py),
with its own address (10.77.N.2-4), its link shaped to 100 Mbit/s, its own folder holding its
keys, data dir and copies of `deployment.json` and the packed corpus, and its libp2p listener on
the same port as the others (`--listen /ip4/ADDRESS/tcp/4001`, the address it registers on
chain for peers to dial). The chain is anvil on the bridge's address, in the root namespace,
where the deployer works. The deployer packs a corpus just above the minimum
(`veritrain data pack`), pastes the printed lines into run.toml (`llama-micro`: `veritrain
export` writes Llama models), makes its own keystore, deploys with it and funds the nodes; two
miners and a validator join; round 0 settles; in round 1, once the validator has scored, miner
m2 is stopped with SIGTERM (a peer that leaves mid-round) and the others go on; round 2 settles
without it, and the model round 2 attested is exported from the validator's data dir.

Asserted: every round settles, m1 is paid in every round and m2 in the rounds it trained; the
export loads in `transformers`; every line of every node's stderr is a JSON object, none holds a
traceback, and m2 logged exactly one `stopping: SIGTERM`. The shipped systemd unit passes
`systemd-analyze verify`, and its ExecStart uses only flags the node has.

Namespaces need root: without them the test is skipped, under CI (CI=true) it fails.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import requests

from protocol.config.corpus import min_corpus_tokens, read_packed_meta
from protocol.core.train.data_defaults import DEFAULT_HELDOUT_EVERY, DEFAULT_PAGE_TOKENS
from tests.conftest import REPO, missing_tool, stop_process
from tests.integration.json_log import records
from tests.integration.lab_net import Machines, anvil_on, lab_of
from tests.integration.netns import Lab
from tests.integration.netutil import inspect, kill_group, reader

pytestmark = [pytest.mark.anvil, pytest.mark.slow]

PASSWORD = "across machines"
PORT = 4001  # every machine's libp2p port (each namespace has its own)
RPC_PORT = 8545
ROUNDS = 3  # --max-rounds: round 0 with everyone, round 1 with m2 leaving, round 2 without it
LEAVER = "m2"
STAKES = {"m1": "150", "m2": "150", "v1": "300"}
VOCAB = 512  # --train-tokenizer
RUN_TOML = """\
run_name = "across-machines"
[chain]
commit_duration = 30               # round 2 waits all of it for m2, which left
score_duration = 120
reveal_duration = 60
audit_duration = 30
challenge_window = 15
result_duration = 60
result_challenge_window = 5
unbonding_delay = 450
min_class_stake = 200              # the one validator (stake 300) checks its class exactly
[training]
preset = "llama-micro"             # `veritrain export` writes Llama models
[training.compute]
inner_steps = 12
checkpoint_every = 3
"""
NETWORK_TIMEOUT_S = 420  # the whole run after `veritrain start`; about 100 s on 2 idle cores


def write_texts(folder: Path, docs: int = 24, words_per_doc: int = 1900, seed: int = 29) -> None:
    """Made-up sentences, the same on every run: with a 512-token BPE, about 89,000 tokens (22
    pages of 4096), just above the 81,920 a run needs."""
    rng = random.Random(seed)
    syllables = ["ka", "ro", "mi", "te", "lu", "sa", "no", "ve", "di", "po", "ra", "ze", "bo", "li", "fu", "ne"]
    lexicon = ["".join(rng.choice(syllables) for _ in range(rng.randint(1, 4))) for _ in range(1500)]
    folder.mkdir(parents=True)
    for d in range(docs):
        sentences, words = [], 0
        while words < words_per_doc:
            n = rng.randint(4, 14)
            sentences.append(" ".join(rng.choice(lexicon) for _ in range(n)).capitalize() + ".")
            words += n
        (folder / f"doc{d:03d}.txt").write_text(" ".join(sentences) + "\n")


@dataclass
class Net(Machines):
    pack_out: str = ""
    timings: dict[str, float] = field(default_factory=dict)
    gas: dict[str, dict[str, int]] = field(default_factory=dict)  # account name -> function -> gas used

    @property
    def deployer(self) -> Path:
        return self.tmp / "deployer"

    def veritrain(self, *args: str, on: str | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
        """`veritrain ARGS` on the deployer's machine, or inside machine `on`, from its folder."""
        cmd = [sys.executable, "-m", "protocol.cli.app", *args]
        cwd = self.deployer
        if on is not None:
            cmd, cwd = self.machine(on).command(cmd), self.home(on)
        env = {**os.environ, "VERITRAIN_PASSWORD": PASSWORD, "COLUMNS": "200"}
        done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)
        assert done.returncode == 0, f"veritrain {' '.join(args)} (exit {done.returncode}):\n{done.stderr[-3000:]}"
        return done

    def start_node(self, name: str) -> None:
        """`veritrain miner|validator ...` in the machine's namespace, stderr to NAME.log; the log
        format is left to the node (JSON lines: stderr is a file)."""
        m = self.machine(name)
        role = "validator" if name.startswith("v") else "miner"
        args = [role, "--rpc", self.rpc, "--deployment", "deployment.json", "--keys", f"keys/{name}",
                "--data-dir", f"data/{name}", "--stake", STAKES[name], "--listen", f"/ip4/{m.address}/tcp/{PORT}",
                "--max-rounds", str(ROUNDS)]
        env = {k: v for k, v in os.environ.items() if k != "VERITRAIN_LOG_FORMAT"}
        env["VERITRAIN_PASSWORD"] = PASSWORD
        with self.log(name).open("w") as err, (self.home(name) / f"{name}.out").open("w") as out:
            self.procs[name] = subprocess.Popen(
                m.command([sys.executable, "-m", "protocol.cli.app", *args]), cwd=self.home(name), env=env,
                stdout=out, stderr=err, stdin=subprocess.DEVNULL, start_new_session=True)

    def wait(self, predicate, timeout_s: float, what: str) -> None:  # type: ignore[no-untyped-def]
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if predicate():
                return
            dead = {n: p.returncode for n, p in self.procs.items() if p.poll() not in (None, 0)}
            if dead:
                pytest.fail(f"node exited {dead} while waiting for {what}:\n{self.tails()}")
            time.sleep(0.5)
        pytest.fail(f"timed out waiting for {what}:\n{self.tails()}")

    def tails(self, chars: int = 2000) -> str:
        return "\n".join(f"--- {n}\n{self.log(n).read_text()[-chars:]}" for n in STAKES if self.log(n).exists())

    def close(self) -> list[str]:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs.values():
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                pass
            kill_group(proc)  # a worker left behind
        if self.anvil is not None:
            stop_process(self.anvil)
        return self.lab.close()


def _lab(tmp: Path) -> Lab:
    return lab_of(list(STAKES))


def _anvil(net: Net) -> None:
    net.rpc, net.anvil = anvil_on(net.lab, RPC_PORT)


def _pack_and_deploy(net: Net) -> None:
    """§10.1: pack, run.toml, the deployer's keystore, deploy; then each machine's copies."""
    write_texts(net.deployer / "texts")
    packed = net.veritrain("data", "pack", "--input", "texts/", "--out", "corpus.bin", "--tokenizer", "tokenizer.json",
                           "--train-tokenizer", str(VOCAB))
    net.pack_out = packed.stdout
    pasted = packed.stdout.split("# paste into run.toml:\n", 1)[1]
    (net.deployer / "run.toml").write_text(RUN_TOML + pasted + "\n")
    net.veritrain("keys", "new", "--out", "keys/deployer")
    deployer = net.veritrain("keys", "show", "--keys", "keys/deployer").stdout.strip()
    # anvil's stand-in for buying gas: on a real chain, send ETH to the deployer's address
    requests.post(net.rpc, json={"jsonrpc": "2.0", "id": 1, "method": "anvil_setBalance",
                                 "params": [deployer, hex(10**20)]}, timeout=10).raise_for_status()
    for name in STAKES:
        net.home(name).mkdir()
    made = {n: subprocess.Popen(net.machine(n).command([sys.executable, "-m", "protocol.cli.app", "keys", "new",
                                                        "--out", f"keys/{n}"]),
                                cwd=net.home(n), env={**os.environ, "VERITRAIN_PASSWORD": PASSWORD},
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) for n in STAKES}
    for n, proc in made.items():  # in parallel: each takes a second or two of scrypt
        assert proc.wait(timeout=120) == 0, f"keys new on {n}: {proc.stderr.read() if proc.stderr else ''}"
        net.accounts[n] = net.veritrain("keys", "show", "--keys", f"keys/{n}", on=n).stdout.strip()
    funding = [a for n in STAKES for a in ("--fund", net.accounts[n])]
    net.veritrain("deploy", "--rpc", net.rpc, "--key", "keys/deployer/keystore.json", "--config", "run.toml",
                  "--out", "deployment.json", "--fund-eth", "1", "--fund-tokens", "1000", *funding)
    for name in STAKES:  # scp deployment.json corpus.bin corpus.bin.json MACHINE:
        for f in ("deployment.json", "corpus.bin", "corpus.bin.json"):
            shutil.copy(net.deployer / f, net.home(name) / f)


def _run_rounds(net: Net) -> None:
    chain = reader(net.rpc, net.deployer / "deployment.json")
    began = time.monotonic()
    for name in STAKES:
        net.start_node(name)
    net.wait(lambda: chain.call("staking", "eligible_miner_count") == 2 and chain.call("staking", "validator_count") == 1,
             240, "every node to register and stake")
    net.timings["nodes_up_s"] = time.monotonic() - began
    net.veritrain("start", "--rpc", net.rpc, "--deployment", "deployment.json", "--keys", "keys/deployer")
    began = time.monotonic()
    net.wait(lambda: chain.current_round() >= 1, NETWORK_TIMEOUT_S, "round 0 to settle")
    net.timings["round0_s"] = time.monotonic() - began
    # mid-round 1: the validator has fetched, replayed and scored m2's work; then m2 leaves
    net.wait(lambda: bytes(chain.call("scores", "score_commitment", 1, net.accounts["v1"])) != bytes(32), NETWORK_TIMEOUT_S,
             "the validator's round-1 scores")
    leaver = net.procs[LEAVER]
    leaver.send_signal(signal.SIGTERM)  # `kill PID`, as systemctl stop does
    assert chain.current_round() == 1, "round 1 ended before m2 was stopped: it did not leave mid-round"
    leaver.wait(timeout=30)
    assert leaver.returncode == 0, net.tails()
    remaining = [p for n, p in net.procs.items() if n != LEAVER]
    net.wait(lambda: all(p.poll() is not None for p in remaining), NETWORK_TIMEOUT_S,
             f"m1 and v1 to finish their {ROUNDS} rounds")
    net.timings["rounds_s"] = time.monotonic() - began


def gas_by_sender(net: Net) -> dict[str, dict[str, int]]:
    """Gas each account spent, by the deployment's function it called (`deploy` for the
    deployer's contract creations and transfers): the figures §10.2 compares with BENCHMARKS §3."""
    chain = reader(net.rpc, net.deployer / "deployment.json")
    w3 = chain.w3
    names = {a.lower(): n for n, a in net.accounts.items()}
    contracts = {c.address.lower(): c for c in (chain.rounds, chain.scores, chain.rewards, chain.results, chain.keys,
                                                  chain.staking, chain.disputes, chain.token)}
    out: dict[str, dict[str, int]] = {}
    for number in range(w3.eth.block_number + 1):
        for tx in w3.eth.get_block(number, full_transactions=True)["transactions"]:
            sender = names.get(tx["from"].lower(), "deployer")
            contract = contracts.get((tx.get("to") or "").lower())
            fn = contract.decode_function_input(tx["input"])[0].fn_name if contract is not None and tx["input"] else "deploy"
            used = int(w3.eth.get_transaction_receipt(tx["hash"])["gasUsed"])
            out.setdefault(sender, {})[fn] = out.get(sender, {}).get(fn, 0) + used
    return out


@pytest.fixture(scope="module")
def network(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Net]:
    tmp = tmp_path_factory.mktemp("machines")
    began = time.monotonic()
    net = Net(tmp, _lab(tmp))
    try:
        _anvil(net)
        _pack_and_deploy(net)
        net.timings["deploy_s"] = time.monotonic() - began
        _run_rounds(net)
        net.veritrain("export", "--round", str(ROUNDS - 1), "--data-dir", "data/v1", "--out", "exported/",
                      "--rpc", net.rpc, "--deployment", "deployment.json", on="v1")
        net.timings["total_s"] = time.monotonic() - began
        net.gas = gas_by_sender(net)
        print(f"across machines: {json.dumps({k: round(v) for k, v in net.timings.items()})}\n"
              f"gas by sender and function: {json.dumps(net.gas)}")
        yield net
    finally:
        errors = net.close()
        assert not errors, errors


def test_the_corpus_is_just_above_the_minimum_and_paths_are_relative(network: Net) -> None:
    meta = read_packed_meta(network.deployer / "corpus.bin")
    need = min_corpus_tokens(DEFAULT_PAGE_TOKENS, DEFAULT_HELDOUT_EVERY)
    assert need <= meta.tokens < 1.2 * need, meta.tokens
    config = tomllib.loads((network.deployer / "run.toml").read_text())
    # the relative path was read from each node's working directory, where its copy is
    assert config["training"]["dataset"]["path"] == "corpus.bin"
    assert config["training"]["model"]["vocab_size"] == meta.vocab_size == VOCAB


def test_rounds_settle_and_the_miners_are_paid(network: Net) -> None:
    chain = reader(network.rpc, network.deployer / "deployment.json")
    dep = network.deployer / "deployment.json"
    paid: dict[int, set[str]] = {}
    for r in range(ROUNDS):
        assert chain.call("rounds", "finalized", r), f"round {r} did not finalize"
        view = inspect(network.rpc, dep, "round", str(r))
        paid[r] = {m["address"].lower() for m in view["miners"] if m["consensus"] > 0 and m["reward"] > 0}
    m1, m2 = network.accounts["m1"].lower(), network.accounts[LEAVER].lower()
    assert all(m1 in paid[r] for r in range(ROUNDS)), paid
    assert m2 in paid[0] and m2 in paid[1] and m2 not in paid[2], paid  # it trained rounds 0 and 1, then left
    leaver = inspect(network.rpc, dep, "node", network.accounts[LEAVER])
    assert leaver["slashed"] == 0  # leaving is not fraud


def test_the_export_loads(network: Net) -> None:
    transformers = pytest.importorskip("transformers")
    import torch

    folder = network.home("v1") / "exported"
    assert sorted(p.name for p in folder.iterdir()) == ["config.json", "model.safetensors"]
    model = transformers.LlamaForCausalLM.from_pretrained(folder).eval()
    with torch.no_grad():
        logits = model(torch.arange(16).unsqueeze(0)).logits  # (1, 16, V)
    assert logits.shape == (1, 16, VOCAB) and torch.isfinite(logits).all()


def test_every_log_line_is_json_and_the_leaver_stopped_once(network: Net) -> None:
    for name in STAKES:
        text = network.log(name).read_text()
        assert "Traceback" not in text, f"{name}:\n{text[-3000:]}"
        for line in text.splitlines():  # records() fails on the first that is not; say which
            try:
                assert isinstance(json.loads(line), dict)
            except (ValueError, AssertionError):
                pytest.fail(f"{name}'s stderr has a line that is not a JSON object: {line!r}")
        events = [r["event"] for r in records(network.log(name))]
        assert "node up" in events, name
        stops = [e for e in events if e.startswith("stopping")]
        assert stops == (["stopping: SIGTERM"] if name == LEAVER else []), (name, stops)


# ---- the shipped systemd unit --------------------------------------------------------------------

UNITS = sorted((REPO / "examples").glob("*.service"))


def _exec_start(unit: str) -> list[str]:
    joined = re.sub(r"\\\n\s*", " ", unit)
    line = next(line for line in joined.splitlines() if line.startswith("ExecStart="))
    return line.removeprefix("ExecStart=").split()


@pytest.mark.parametrize("unit_path", UNITS, ids=[p.name for p in UNITS])
def test_the_systemd_unit_verifies(unit_path: Path, tmp_path: Path) -> None:
    """`systemd-analyze verify` on a copy with this checkout's paths: ExecStart's binary (the
    venv's `veritrain`) exists, and every flag it passes is one the node takes."""
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        missing_tool("systemd-analyze not found: apt-get install systemd (done by .ci/run)", "VERITRAIN_REQUIRE_SYSTEMD")
    binary = Path(sys.executable).with_name("veritrain")
    assert binary.is_file(), f"{binary}: the venv has no `veritrain` (pip install -e .)"
    text = unit_path.read_text()
    args = _exec_start(text)
    assert args[0] == "/opt/veritrain/venv/bin/veritrain", args
    role = args[1]
    helped = subprocess.run([str(binary), role, "--help"], capture_output=True, text=True, timeout=60,
                            env={**os.environ, "COLUMNS": "200"})
    assert helped.returncode == 0, helped.stderr
    unknown = [a for a in args[2:] if a.startswith("--") and a not in helped.stdout]
    assert not unknown, f"{unit_path.name} passes flags `veritrain {role}` does not take: {unknown}"
    (tmp_path / "state").mkdir()
    local = (text.replace("/opt/veritrain/venv/bin/veritrain", str(binary))
                 .replace("/var/lib/veritrain", str(tmp_path / "state")))
    copy = tmp_path / unit_path.name
    copy.write_text(local)
    checked = subprocess.run([analyze, "verify", str(copy)], capture_output=True, text=True, timeout=60)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert unit_path.name not in checked.stderr, checked.stderr  # no warning about the unit itself
