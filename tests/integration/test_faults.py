"""Faults on a live network of CLI node processes on anvil, in one run of three rounds:

- round 0: miner 2 is killed (SIGKILL, with its worker) mid-round before it commits, and never returns;
- round 1: a new miner joins with an empty data dir and must fetch the global state from
  peers; validator 1 is killed right after committing its scores, and restarted;
- round 2: the RPC endpoint of miner 0 and validator 0 goes away for a few seconds;
- from round 0: miner 4 runs `--cheat lazy` (it fakes its training) and must be reported,
  slashed and never paid (slashed under the minimum stake, it sits out the later rounds).

Each test below asserts one fault's outcome on the shared run. Miners 0 and 1 run every round
through the faults, so the same run also shows what a network of honest CLI nodes on anvil does
over three rounds: each round certifies a model, held-out loss goes down, and every honest miner
is paid in each round and never slashed. Both were runs of their own in
tests/integration/test_anvil_network.py (three honest rounds; a lazy miner among two honest
ones), merged here so that one network shows them all.
"""

from __future__ import annotations

import re
import signal
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest

from protocol.chain.events import read_events
from tests.conftest import run_cli
from tests.integration.netutil import (
    TcpRelay,
    deploy_with_keys,
    inspect,
    kill_group,
    micro_run_toml,
    reader,
    sent_calls,
    start_node,
    stop_all,
    wait_for,
)

pytestmark = [pytest.mark.anvil, pytest.mark.slow]
ROUNDS = 3
OUTAGE_S = 6.0
RUN_TOML = micro_run_toml("faults", commit_duration=45)
# calls a node makes once per round (or per report): a second one would be a duplicate
ONCE_PER_ROUND = {"commit_update", "commit_scores", "reveal_scores"}


@dataclass
class FaultRun:
    rpc: str
    dep: Path
    miners: list[str]  # 0, 1 stay; 2 is killed in round 0; 3 joins in round 1; 4 is lazy from round 0
    validators: list[str]  # 1 is killed and restarted in round 1
    logs: dict[str, Path]


def log_has(log: Path, pattern: str) -> bool:
    return log.exists() and re.search(pattern, log.read_text()) is not None


@pytest.fixture(scope="module")
def faults(anvil, tmp_path_factory) -> FaultRun:
    tmp = tmp_path_factory.mktemp("faults")
    dep, keys, accounts = deploy_with_keys(anvil.url, tmp, 7, RUN_TOML)
    miners, validators = accounts[:5], accounts[5:]
    relay = TcpRelay(int(anvil.url.rsplit(":", 1)[1]))
    logs = {name: tmp / f"{name}.log" for name in ("m0", "m1", "m2", "m3", "m4", "v0", "v1")}
    procs: dict[str, object] = {}

    def start(name: str, role: str, key: Path, rounds: int, rpc: str = anvil.url, extra: tuple[str, ...] = ()) -> None:
        stake = "150" if role == "miner" else "300"
        procs[name] = start_node(role, rpc, dep, key, tmp / f"data-{name}", rounds, ["--stake", stake, *extra],
                                 logs[name])

    def alive() -> list:
        return [p for p in procs.values() if p is not None]

    chain = reader(anvil.url, dep)

    def wait(pred, timeout_s: float, what: str) -> None:
        wait_for(pred, timeout_s, what, alive(), list(logs.values()))

    try:
        start("m0", "miner", keys[0], ROUNDS, relay.url)
        start("m1", "miner", keys[1], ROUNDS)
        start("m2", "miner", keys[2], ROUNDS)
        start("m4", "miner", keys[4], ROUNDS, extra=("--cheat", "lazy"))
        start("v0", "validator", keys[5], ROUNDS, relay.url)
        start("v1", "validator", keys[6], ROUNDS)
        wait(lambda: chain.call("staking", "eligible_miner_count") == 4 and chain.call("staking", "validator_count") == 2,
             240, "every node to register and stake")
        # miner 2 is frozen (with its worker) before round 0 opens and killed once the others
        # committed: it dies mid-round without committing, whatever the training speed (on
        # the micro preset a round's training can finish between two polls of its log)
        kill_group(procs["m2"], signal.SIGSTOP)
        started = run_cli("start", "--rpc", anvil.url, "--deployment", str(dep), "--keys", str(keys[0]),
                          env={"VERITRAIN_PASSWORD": "network test"})
        assert started.code == 0, started.stderr

        wait(lambda: all(chain.call("rounds", "has_committed", 0, m) for m in miners[:2]), 120,
             "miners 0 and 1 to commit round 0")
        kill_group(procs.pop("m2"))  # mid-round, before its commit

        wait(lambda: chain.current_round() >= 1, 300, "round 0 to settle without miner 2")
        start("m3", "miner", keys[3], 1)  # the newcomer: empty data dir, round 1 or 2

        wait(lambda: log_has(logs["v1"], r"scores committed round=1"), 300, "validator 1 to commit round 1")
        kill_group(procs["v1"])
        procs["v1"].wait(timeout=15)
        start("v1", "validator", keys[6], ROUNDS - 1)  # same data dir: resumes round 1

        wait(lambda: chain.current_round() >= 2, 300, "round 1 to settle")
        relay.down()
        time.sleep(OUTAGE_S)
        relay.up()

        wait(lambda: chain.current_round() >= ROUNDS, 400, f"round {ROUNDS - 1} to settle")
        wait(lambda: all(p.poll() is not None for p in alive()), 240, "nodes to finish")
        assert all(p.returncode == 0 for p in alive()), [p.returncode for p in alive()]
    finally:
        stop_all(alive())
        relay.down()
    return FaultRun(anvil.url, dep, miners, validators, logs)


def node(run: FaultRun, account: str) -> dict:
    return inspect(run.rpc, run.dep, "node", account)


def test_round_settles_without_a_miner_killed_mid_round(faults):
    rounds = {r["round"]: r for r in inspect(faults.rpc, faults.dep, "rounds")}
    # miners 0, 1 and the lazy miner 4 commit round 0 (lazy work is committed like honest work)
    assert rounds[0]["commits"] == 3 and int(rounds[1]["model_hash"], 16) != 0
    assert not reader(faults.rpc, faults.dep).call("rounds", "has_committed", 0, faults.miners[2])
    for m in faults.miners[:2]:
        history = {r["round"]: r for r in node(faults, m)["rounds"]}
        assert history[0]["consensus"] > 0 and history[0]["reward"] > 0
    killed = node(faults, faults.miners[2])
    assert killed["rounds"] == [] and killed["slashed"] == 0  # a crash before committing is not fraud


def test_newcomer_fetches_global_state_from_peers_and_earns(faults):
    log = faults.logs["m3"].read_text()
    assert re.search(r"global state fetched from peers round=[12]", log), log[-2000:]
    assert "recomputing from history" not in log
    history = node(faults, faults.miners[3])["rounds"]
    assert len(history) == 1 and history[0]["consensus"] > 0 and history[0]["reward"] > 0


def test_training_goes_on_after_miners_leave_and_join(faults):
    listed = inspect(faults.rpc, faults.dep, "rounds")
    assert [r["round"] for r in listed][:ROUNDS + 1] == list(range(ROUNDS + 1))
    rounds = {r["round"]: r for r in listed}
    certified = [rounds[r] for r in range(1, ROUNDS + 1)]
    assert all(int(r["model_hash"], 16) != 0 for r in certified)
    final = [rounds[r] for r in range(ROUNDS) if rounds[r]["result"]["final_root"]]
    assert len(final) == ROUNDS and final[-1]["heldout_loss"] < final[0]["heldout_loss"]


def test_miners_that_stay_are_paid_in_every_round_and_never_slashed(faults):
    for m in faults.miners[:2]:
        history = node(faults, m)
        assert history["claimable"] + history["claimed"] > 0 and history["slashed"] == 0, history
        assert len(history["rounds"]) == ROUNDS and all(r["consensus"] > 0 for r in history["rounds"]), history


def _once_per_round(calls: list[tuple[str, dict, int]]) -> Counter:
    keys = Counter((fn, args["round"], args.get("miner")) for fn, args, _ in calls
                   if fn in ONCE_PER_ROUND or fn == "report_fraud")
    keys.update((fn, args["report_id"]) for fn, args, _ in calls if fn == "vote_fraud")
    return keys


def test_restarted_validator_sends_no_duplicate_and_catches_up(faults):
    chain = reader(faults.rpc, faults.dep)
    v1 = faults.validators[1]
    calls = sent_calls(chain, v1)
    duplicates = {k: n for k, n in _once_per_round(calls).items() if n > 1}
    assert not duplicates, duplicates
    assert all(status == 1 for fn, _, status in calls if fn in ONCE_PER_ROUND), calls
    # it came back on its registered address and key: one staking and one BLS registration
    registrations = Counter("pubkey" in args for fn, args, _ in calls if fn == "register")
    assert registrations == Counter({False: 1, True: 1}), registrations
    log = faults.logs["v1"].read_text()
    assert log.count("scores committed round=1") == 1  # the restart revealed the journaled scores
    for r in range(ROUNDS):
        assert chain.call("scores", "revealed", r, v1), f"validator 1 did not reveal round {r}"
        final = bytes(chain.call("results", "final_root", r))
        posts = [p for p in read_events(chain, "results", "ResultPosted") if p["round"] == r and
                 bytes(p["result_root"]) == final]
        assert posts and v1 not in posts[0]["non_signers"], f"validator 1 did not sign round {r}'s result"


def test_nodes_ride_out_an_rpc_outage(faults):
    chain = reader(faults.rpc, faults.dep)
    for name in ("m0", "v0"):
        assert "chain unreachable, retrying" in faults.logs[name].read_text(), name
    m0, v0 = faults.miners[0], faults.validators[0]
    for account in (m0, v0):
        duplicates = {k: n for k, n in _once_per_round(sent_calls(chain, account)).items() if n > 1}
        assert not duplicates, duplicates
    assert [r["round"] for r in node(faults, m0)["rounds"]] == list(range(ROUNDS))
    assert all(chain.call("scores", "revealed", r, v0) for r in range(ROUNDS))


def test_lazy_miner_is_reported_slashed_and_unpaid(faults):
    lazy = node(faults, faults.miners[4])
    assert lazy["slashed"] > 0
    assert lazy["claimable"] + lazy["claimed"] == 0
    assert lazy["rounds"] and all(r["consensus"] == 0 and r["reward"] == 0 for r in lazy["rounds"]), lazy
    disputes = inspect(faults.rpc, faults.dep, "disputes")
    assert any(d["miner"] == faults.miners[4] and d["status"] == "confirmed" for d in disputes), disputes
    honest = [faults.miners[i] for i in (0, 1, 3)]
    assert not any(d["miner"] in honest and d["status"] == "confirmed" for d in disputes), disputes
