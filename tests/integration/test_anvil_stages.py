"""A staged run on anvil with every node its own `veritrain` process (PROTOCOL.md §16): stage 0's
miner runs hardware class cpu/avx2/1t, stage 1's cpu/avx2/2t, and each class has a validator (the
1t one with two thirds of the stake, so that class is checked exactly: `class_checks.covered`).
Mid-round, once stage 1 has finished its first segment, its node is killed (the process group,
worker included). Stage 0 then waits out its neighbour, commits the whole segments both stages
finished, and its class's validator replays them exactly; the round settles. Only the killed stage
loses: it committed nothing and earns nothing, stage 0 is verified and paid its own share, and
nobody is reported or slashed."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.integration.netutil import (
    deploy_with_keys,
    inspect,
    kill_group,
    log_tails,
    reader,
    start_node,
    stop_all,
    wait_for,
    wait_for_line,
)

pytestmark = pytest.mark.anvil

ONE, TWO = "cpu/avx2/1t/float32", "cpu/avx2/2t/float32"
RUN_TOML = """
run_name = "anvil-stages"
[chain]
commit_duration = 60               # the round waits all of it for the killed stage
score_duration = 120
reveal_duration = 60
challenge_window = 15
result_duration = 60
result_challenge_window = 5
unbonding_delay = 1000
committee = 0                      # each class's one validator decides its stage
min_class_stake = 200
[training]
preset = "micro"
stages = 2
[training.compute]
inner_steps = 12
checkpoint_every = 3
"""
# Stage 1 runs SLOWDOWN times slower: after each step it sleeps (SLOWDOWN - 1) x the step's wall
# time while stage 0 waits for its next tensor. Stage 0 must not give up on the slow but living
# stage 1: STAGE_WAIT_S covers a step of up to 5 s (a 15 s sleep, then the step), over 10 x the
# 0.3-0.4 s a step takes on 2 quiet cores (at slowdown 20 and 8 s, a loaded CI host made stage 0
# give up inside its first segment). Stage 1's 9 slowed steps left take far longer than the 0.2 s
# the test takes to see its first segment and kill it.
SLOWDOWN = 4
STAGE_WAIT_S = 20  # how long stage 0 waits for the killed stage's tensor


def test_a_killed_stage_alone_loses_and_its_neighbour_commits_what_both_finished(anvil, tmp_path: Path) -> None:
    dep, keys, accounts = deploy_with_keys(anvil.url, tmp_path, 4, RUN_TOML)
    names = ["stage0", "stage1", "v1t", "v2t"]
    args = {"stage0": ("miner", ["--stage", "0", "--hardware-class", ONE, "--stage-wait", str(STAGE_WAIT_S)]),
            # slower, so the kill lands inside its round, after its first segment
            "stage1": ("miner", ["--stage", "1", "--hardware-class", TWO, "--slowdown", str(SLOWDOWN)]),
            "v1t": ("validator", ["--hardware-class", ONE]), "v2t": ("validator", ["--hardware-class", TWO])}
    logs = {n: tmp_path / f"{n}.log" for n in names}
    stakes = {"stage0": "150", "stage1": "150", "v1t": "600", "v2t": "250"}
    procs = {n: start_node(args[n][0], anvil.url, dep, keys[i], tmp_path / f"data-{n}", 1,
                           ["--stake", stakes[n], *args[n][1]], logs[n])
             for i, n in enumerate(names)}
    chain = reader(anvil.url, dep)
    try:
        wait_for(lambda: chain.call("staking", "eligible_miner_count") == 2 and chain.call("staking", "validator_count") == 2,
                 240, "every node to register and stake", list(procs.values()), list(logs.values()))
        started = run_cli("start", "--rpc", anvil.url, "--deployment", str(dep), "--keys", str(keys[0]),
                          env={"VERITRAIN_PASSWORD": "network test"})
        assert started.code == 0, started.stderr
        wait_for_line(procs["stage1"], logs["stage1"], "stage segment done round=0 stage=1 step=3", 240)
        kill_group(procs["stage1"])  # the machine dies mid-round
        wait_for(lambda: chain.read.rounds.finalized(0), 420, "round 0 to settle",
                 [p for n, p in procs.items() if n != "stage1"], list(logs.values()))
    finally:
        stop_all(list(procs.values()))
    text = {n: logs[n].read_text() for n in names}
    assert "pipeline stalled round=0 silent_stage=1" in text["stage0"], log_tails(list(logs.values()))
    steps = chain.read.rounds.commit_steps(0, accounts[0])
    assert steps in (3, 6), (steps, log_tails(list(logs.values())))  # the whole segments both finished
    assert not chain.call("rounds", "has_committed", 0, accounts[1])  # the killed stage committed nothing
    assert "checked stage round=0" in text["v1t"] and "verdict=ok" in text["v1t"]  # replayed exactly in its class
    assert chain.read.disputes.report_count() == 0  # nobody is reported, so nobody is slashed
    round0 = inspect(anvil.url, dep, "round", "0")
    paid = {m["address"].lower(): m["reward"] for m in round0["miners"]}
    assert paid[accounts[0].lower()] > 0, round0  # stage 0 is paid its own share
    assert paid.get(accounts[1].lower(), 0) == 0  # the killed stage earns nothing, and loses nothing else
    assert [chain.read.staking.stake_of(a) for a in accounts[:2]] == [150 * 10**18] * 2
