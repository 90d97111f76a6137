"""Churn and faults on one network of CLI node processes on anvil, for ROUNDS rounds.

The churn soak (issue 17, "no lost work under churn"): each round two of the four churned miners
(m2-m5) and, at random, one of two validators (v2, v3) are SIGKILLed (with their workers) at a
random moment in the round and restarted at once with the same command. Around them, the faults
a real network meets, each on its own node:

- round 0: miner m7 is frozen before the round opens and killed once m0 and m1 committed: it
  dies mid-round, before it commits, and never returns;
- round 1: a newcomer (m8) joins with an empty data dir and must fetch the global state from
  peers; validator v1 is killed right after committing its scores, and restarted;
- round 2: the RPC endpoint of m0 and v0 (a TcpRelay in front of anvil) goes away for a few seconds;
- from round 0: miner m6 runs `--cheat lazy` (it fakes its training) and must be reported,
  slashed and never paid (slashed under the minimum stake, it sits out the later rounds).

m0 and m1 run every round untouched but for the outage, so the same run shows what honest CLI
nodes on anvil do over many rounds: each round certifies a model, held-out loss goes down, every
honest miner that stays is paid every round and never slashed. The churn test asserts that

- every round settles (finalized, the next round's model hash set),
- no node sends a once-per-round transaction twice (commit, score commit, reveal),
- every verified commit is paid in its round (consensus > 0, reward > 0),
- no honest node is slashed,
- no data dir loses an entry (each journaled commit keeps its record and blobs),
- no process is left behind,

and it writes its figures to churn.json (pytest tmp dir; test-artifacts/ under VERITRAIN_ARTIFACTS).
Each fault's outcome is its own test below, on the same run. The faults were a network of their
own (tests/integration/test_faults.py, three rounds), merged here so that one network shows both.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

from protocol.node.store import NodeState
from tests.conftest import REPO, run_cli
from tests.integration.netutil import (
    PASSWORD,
    TcpRelay,
    deploy_with_keys,
    inspect,
    kill_group,
    reader,
    sent_calls,
    start_node,
    stop_all,
    wait_for,
)

pytestmark = [pytest.mark.anvil, pytest.mark.slow, pytest.mark.soak]
SEED = 17
ROUNDS = 5
MINERS, VALIDATORS = 9, 4  # m0-m5 honest, m6 lazy, m7 gone in round 0, m8 the newcomer; v0-v3
STAY = ("m0", "m1")  # honest miners never killed (m0 rides out the RPC outage)
CHURNED_MINERS, CHURNED_VALIDATORS = ("m2", "m3", "m4", "m5"), ("v2", "v3")
LAZY, GONE, NEWCOMER, RESTARTED_VALIDATOR = "m6", "m7", "m8", "v1"
BEHIND_RELAY = ("m0", "v0")  # their RPC endpoint goes away in OUTAGE_ROUND
OUTAGE_ROUND, OUTAGE_S = 2, 6.0
MINER_KILLS = 2  # of the four churned miners, each round
VALIDATOR_KILL_P = 0.6  # chance that one of the two churned validators is killed too in a round
KILL_WINDOW_S = 12.0  # a kill lands this many seconds at most after its round opens
ONCE_PER_ROUND = ("commit_update", "commit_scores", "reveal_scores")
# A restart is quick on a quiet machine (~20 s) but took 65 s in CI, where another network shares
# the two cores: validators wait for a restarted miner up to half the score phase and voters until
# a report's window closes, so both are sized for a 65 s restart with room to spare (100 s and
# ~115 s). Phases still close as soon as every node has acted, so a quiet machine waits no longer.
RUN_TOML = """
run_name = "churn-soak"
[chain]
commit_duration = 30
score_duration = 200
reveal_duration = 60
audit_duration = 30
challenge_window = 120
result_duration = 150
result_challenge_window = 4
unbonding_delay = 1000
[training]
preset = "micro"
[training.compute]
inner_steps = 6
checkpoint_every = 3
"""


class Network:
    def __init__(self, rpc: str, tmp: Path) -> None:
        self.rpc, self.tmp = rpc, tmp
        self.dep, self.keys, self.accounts = deploy_with_keys(rpc, tmp, MINERS + VALIDATORS, RUN_TOML)
        self.names = [f"m{i}" for i in range(MINERS)] + [f"v{j}" for j in range(VALIDATORS)]
        self.procs: dict[str, subprocess.Popen] = {}
        self.groups: set[int] = set()  # every process group started (a node and its worker)
        self.restarts = 0
        self.newcomer_exit: int | None = None  # m8 runs `--max-rounds 1`: it leaves by itself
        self.relay = TcpRelay(int(rpc.rsplit(":", 1)[1]))

    def account(self, name: str) -> str:
        return self.accounts[self.names.index(name)]

    def log(self, name: str) -> Path:
        return self.tmp / f"{name}.log"

    def data(self, name: str) -> Path:
        return self.tmp / f"data-{name}"

    def start(self, name: str) -> None:
        i = self.names.index(name)
        role, stake = ("miner", "150") if name.startswith("m") else ("validator", "300")
        rpc = self.relay.url if name in BEHIND_RELAY else self.rpc
        extra = ["--stake", stake, *(["--cheat", "lazy"] if name == LAZY else [])]
        proc = start_node(role, rpc, self.dep, self.keys[i], self.data(name), 1 if name == NEWCOMER else 1000,
                          extra, self.log(name))
        self.procs[name] = proc
        self.groups.add(proc.pid)

    def kill_and_restart(self, name: str) -> None:
        proc = self.procs[name]
        kill_group(proc, signal.SIGKILL)
        proc.wait(timeout=15)
        self.start(name)
        self.restarts += 1

    def all_logs(self) -> list[Path]:
        return [self.log(n) for n in self.names]

    def logged(self, name: str, pattern: str) -> bool:
        log = self.log(name)
        return log.exists() and re.search(pattern, log.read_text()) is not None


def lingering(groups: set[int]) -> list[str]:
    """Processes still alive in any of these process groups (a node or a worker left behind)."""
    left = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if fields[0] != "Z" and int(fields[2]) in groups:
            left.append(f"{entry.name}: {stat[:80]}")
    return left


def logged_rounds(log: Path, event: str) -> set[int]:
    return {int(m) for m in re.findall(rf"{event} round=(\d+)", log.read_text())}


def lost_entries(net: Network) -> list[str]:
    """Journaled work whose record or blobs are gone from the node's data dir."""
    lost = []
    for name in net.names:
        state = NodeState(net.data(name) / "state.sqlite")
        blobs = net.data(name) / "blobs"
        try:
            if name.startswith("m"):
                for r in logged_rounds(net.log(name), "committed"):
                    work = state.recall(r, "work")
                    if work is None:
                        lost.append(f"{name} round {r}: work record")
                        continue
                    lost += [f"{name} round {r}: {k} blob" for k in ("update_hash", "carry")
                             if not (blobs / work[k]).is_file()]
            else:
                for r in logged_rounds(net.log(name), "scores committed"):
                    entry = state.recall(r, "scores")
                    if entry is None:
                        lost.append(f"{name} round {r}: scores record")
                    elif not (blobs / entry["witness_root"]).is_file():
                        lost.append(f"{name} round {r}: witness bundle blob")
        finally:
            state.close()
    return lost


@pytest.fixture(scope="module")
def churn(anvil, tmp_path_factory):  # type: ignore[no-untyped-def]
    tmp = tmp_path_factory.mktemp("churn")
    started_at = time.monotonic()
    net = Network(anvil.url, tmp)
    chain = reader(anvil.url, net.dep)
    rng = random.Random(SEED)
    kills: list[tuple[int, str, float]] = []

    def wait(pred, timeout_s: float, what: str) -> None:  # type: ignore[no-untyped-def]
        wait_for(pred, timeout_s, what, list(net.procs.values()), net.all_logs())

    try:
        for name in net.names:
            if name != NEWCOMER:
                net.start(name)
        wait(lambda: chain.call("staking", "eligible_miner_count") == MINERS - 1
             and chain.call("staking", "validator_count") == VALIDATORS, 240, "every node to register and stake")
        # m7 is frozen (with its worker) before round 0 opens and killed once m0 and m1 committed:
        # it dies mid-round without committing, whatever the training speed
        kill_group(net.procs[GONE], signal.SIGSTOP)
        started = run_cli("start", "--rpc", anvil.url, "--deployment", str(net.dep), "--keys", str(net.keys[0]),
                          env={"VERITRAIN_PASSWORD": PASSWORD})
        assert started.code == 0, started.stderr
        for r in range(ROUNDS):
            wait(lambda r=r: chain.current_round() >= r, 600, f"round {r} to open")
            opened = time.monotonic()
            victims = rng.sample(CHURNED_MINERS, MINER_KILLS)
            if rng.random() < VALIDATOR_KILL_P:
                victims.append(rng.choice(CHURNED_VALIDATORS))
            plan = sorted((rng.uniform(0, KILL_WINDOW_S), v) for v in victims)
            for at, victim in plan:
                time.sleep(max(0.0, opened + at - time.monotonic()))
                net.kill_and_restart(victim)
                kills.append((r, victim, round(at, 1)))
            _inject_faults(net, chain, r, wait)
        wait(lambda: chain.current_round() >= ROUNDS, 600, f"round {ROUNDS - 1} to settle")
        wait(lambda: all(chain.call("rounds", "finalized", r) for r in range(ROUNDS)), 120, "every round final")
        net.newcomer_exit = net.procs[NEWCOMER].poll()
    finally:
        stop_all(list(net.procs.values()))
        net.relay.down()
        for group in net.groups:  # the workers of killed nodes too
            try:
                os.killpg(group, signal.SIGKILL)
            except ProcessLookupError:
                pass
    return net, chain, kills, time.monotonic() - started_at


def _inject_faults(net: Network, chain, r: int, wait) -> None:  # type: ignore[no-untyped-def]
    """This round's faults, after its random kills."""
    if r == 0:
        stay = [net.account(n) for n in STAY]
        wait(lambda: all(chain.call("rounds", "has_committed", 0, m) for m in stay), 120, "m0 and m1 to commit round 0")
        kill_group(net.procs.pop(GONE))  # mid-round, before its commit; never restarted
    elif r == 1:
        net.start(NEWCOMER)  # empty data dir: round 1 or 2
        wait(lambda: net.logged(RESTARTED_VALIDATOR, r"scores committed round=1"), 300, "v1 to commit round 1")
        net.kill_and_restart(RESTARTED_VALIDATOR)  # same data dir: resumes round 1
    elif r == OUTAGE_ROUND:
        net.relay.down()
        time.sleep(OUTAGE_S)
        net.relay.up()


def test_churn_soak_loses_no_work(churn):  # type: ignore[no-untyped-def]
    net, chain, kills, elapsed = churn
    rpc, dep = net.rpc, net.dep
    problems: list[str] = []
    disputes = inspect(rpc, dep, "disputes")
    confirmed = {(d["round"], d["miner"].lower()) for d in disputes if d["status"] == "confirmed"}
    paid = unpaid = 0
    for r in range(ROUNDS):
        if not chain.call("rounds", "finalized", r):
            problems.append(f"round {r} not finalized")
        if int.from_bytes(bytes(chain.call("rounds", "model_hash", r + 1)), "big") == 0:
            problems.append(f"round {r} produced no model hash")
        for v in net.accounts[MINERS:]:  # a restarted validator reveals what it committed
            if (bytes(chain.call("scores", "score_commitment", r, v)) != bytes(32)
                    and not chain.call("scores", "revealed", r, v)):
                problems.append(f"round {r}: validator {v} committed scores but did not reveal them")
        view = inspect(rpc, dep, "round", str(r))
        for m in view["miners"]:
            if (r, m["address"].lower()) in confirmed or m["address"].lower() == net.account(LAZY).lower():
                continue  # not verified (the lazy miner's faked work, reported or not)
            if m["consensus"] > 0 and m["reward"] > 0:
                paid += 1
            else:
                unpaid += 1
                problems.append(f"round {r}: verified commit of {m['address']} unpaid "
                                f"(consensus {m['consensus']}, reward {m['reward']})")
    duplicates = 0
    for account in net.accounts:
        sent = Counter((fn, args["round"]) for fn, args, _ in sent_calls(chain, account) if fn in ONCE_PER_ROUND)
        for key, n in sent.items():
            if n > 1:
                duplicates += n - 1
                problems.append(f"{account} sent {key} {n} times")
    honest = [a for n, a in zip(net.names, net.accounts, strict=True) if n != LAZY]
    slashed = [a for a in honest if inspect(rpc, dep, "node", a)["slashed"] > 0]
    problems += [f"honest node {a} slashed" for a in slashed]
    lost = lost_entries(net)
    problems += lost
    left = lingering(net.groups)
    problems += [f"process left: {p}" for p in left]
    figures = {"seed": SEED, "rounds": ROUNDS, "miners": MINERS, "validators": VALIDATORS,
               "kills": len(kills), "restarts": net.restarts, "kill_plan": kills,
               "verified_commits_paid": paid, "verified_commits_unpaid": unpaid,
               "duplicate_txs": duplicates, "slashed_honest": len(slashed), "lost_work": unpaid + len(lost),
               "lost_entries": len(lost), "processes_left": len(left), "seconds": round(elapsed), "problems": problems}
    text = json.dumps(figures, indent=2)
    print(f"churn soak: {ROUNDS} rounds, {len(kills)} kills, {net.restarts} restarts, "
          f"lost work = {figures['lost_work']}, {paid} verified commits paid, {round(elapsed)} s")
    (net.tmp / "churn.json").write_text(text)
    if os.environ.get("VERITRAIN_ARTIFACTS"):
        out = REPO / "test-artifacts"
        out.mkdir(exist_ok=True)
        (out / "churn.json").write_text(text)
    assert not problems, text
    assert paid > 0


# ---- each fault's outcome on the same run (the faults network's tests, merged here) -------------
ONCE_OR_REPORT = ("commit_update", "commit_scores", "reveal_scores", "report_fraud")


def _node(net: Network, name: str) -> dict:
    return inspect(net.rpc, net.dep, "node", net.account(name))


def test_round_settles_without_a_miner_killed_mid_round(churn):  # type: ignore[no-untyped-def]
    net, chain, _, _ = churn
    assert not chain.call("rounds", "has_committed", 0, net.account(GONE))
    assert int.from_bytes(bytes(chain.call("rounds", "model_hash", 1)), "big") != 0
    for name in STAY:
        history = {r["round"]: r for r in _node(net, name)["rounds"]}
        assert history[0]["consensus"] > 0 and history[0]["reward"] > 0
    gone = _node(net, GONE)
    assert gone["rounds"] == [] and gone["slashed"] == 0  # a crash before committing is not fraud


def test_newcomer_fetches_global_state_from_peers_and_earns(churn):  # type: ignore[no-untyped-def]
    net, _, _, _ = churn
    log = net.log(NEWCOMER).read_text()
    assert re.search(r"global state fetched from peers round=[12]", log), log[-2000:]
    assert "recomputing from history" not in log
    history = _node(net, NEWCOMER)["rounds"]
    assert len(history) == 1 and history[0]["consensus"] > 0 and history[0]["reward"] > 0
    assert net.newcomer_exit == 0  # done with its one round (`--max-rounds 1`), it left cleanly


def test_training_goes_on_after_miners_leave_and_join(churn):  # type: ignore[no-untyped-def]
    net, _, _, _ = churn
    listed = inspect(net.rpc, net.dep, "rounds")
    assert [r["round"] for r in listed][:ROUNDS + 1] == list(range(ROUNDS + 1))
    rounds = {r["round"]: r for r in listed}
    assert all(int(rounds[r]["model_hash"], 16) != 0 for r in range(1, ROUNDS + 1))
    final = [rounds[r] for r in range(ROUNDS) if rounds[r]["result"]["final_root"]]
    assert len(final) == ROUNDS and final[-1]["heldout_loss"] < final[0]["heldout_loss"]


def test_miners_that_stay_are_paid_in_every_round_and_never_slashed(churn):  # type: ignore[no-untyped-def]
    net, _, _, _ = churn
    for name in STAY:
        history = _node(net, name)
        assert history["claimable"] + history["claimed"] > 0 and history["slashed"] == 0, history
        assert len(history["rounds"]) == ROUNDS and all(r["consensus"] > 0 for r in history["rounds"]), history


def _once_per_round(calls: list[tuple[str, dict, int]]) -> Counter:
    keys = Counter((fn, args["round"], args.get("miner")) for fn, args, _ in calls if fn in ONCE_OR_REPORT)
    keys.update((fn, args["report_id"]) for fn, args, _ in calls if fn == "vote_fraud")
    return keys


def test_restarted_validator_sends_no_duplicate_and_catches_up(churn):  # type: ignore[no-untyped-def]
    net, chain, _, _ = churn
    v1 = net.account(RESTARTED_VALIDATOR)
    calls = sent_calls(chain, v1)
    duplicates = {k: n for k, n in _once_per_round(calls).items() if n > 1}
    assert not duplicates, duplicates
    assert all(status == 1 for fn, _, status in calls if fn in ONCE_PER_ROUND), calls
    # it came back on its registered address and key: one staking and one BLS registration
    registrations = Counter("pubkey" in args for fn, args, _ in calls if fn == "register")
    assert registrations == Counter({False: 1, True: 1}), registrations
    assert net.log(RESTARTED_VALIDATOR).read_text().count("scores committed round=1") == 1  # revealed the journaled ones
    for r in range(ROUNDS):
        assert chain.call("scores", "revealed", r, v1), f"v1 did not reveal round {r}"
        final = bytes(chain.call("results", "final_root", r))
        # it computed the certified root itself (whether its share came before the poster had
        # more than 2/3 is a race the restart may lose; the share is not what catching up means)
        computed = f"result computed round={r} root={final.hex()[:12]}"
        assert computed in net.log(RESTARTED_VALIDATOR).read_text(), f"v1 did not compute round {r}'s result"


def test_nodes_ride_out_an_rpc_outage(churn):  # type: ignore[no-untyped-def]
    net, chain, _, _ = churn
    for name in BEHIND_RELAY:
        assert "chain unreachable, retrying" in net.log(name).read_text(), name
        duplicates = {k: n for k, n in _once_per_round(sent_calls(chain, net.account(name))).items() if n > 1}
        assert not duplicates, duplicates
    assert [r["round"] for r in _node(net, "m0")["rounds"]] == list(range(ROUNDS))
    assert all(chain.call("scores", "revealed", r, net.account("v0")) for r in range(ROUNDS))


def test_lazy_miner_is_reported_slashed_and_unpaid(churn):  # type: ignore[no-untyped-def]
    net, _, _, _ = churn
    lazy = _node(net, LAZY)
    assert lazy["slashed"] > 0
    assert lazy["claimable"] + lazy["claimed"] == 0
    assert lazy["rounds"] and all(r["consensus"] == 0 and r["reward"] == 0 for r in lazy["rounds"]), lazy
    disputes = inspect(net.rpc, net.dep, "disputes")
    assert any(d["miner"] == net.account(LAZY) and d["status"] == "confirmed" for d in disputes), disputes
    honest = [net.account(n) for n in net.names if n.startswith("m") and n != LAZY]
    assert not any(d["miner"] in honest and d["status"] == "confirmed" for d in disputes), disputes
